//! JWT verification against RFC 7515's published RS256 vector and against ES256 tokens made
//! here with a fresh P-256 key whose JWK Set the test writes beside them.

use super::*;
use crate::keys::PrivateKey;

/// RFC 7515 Appendix A.2 (RS256): the JWS of A.2.1 and the RSA key of A.2 (the public half,
/// as RFC 7517 Appendix A.1 also prints it). Claims: `iss` "joe", `exp` 1300819380.
const RFC7515_A2_TOKEN: &str = concat!(
    "eyJhbGciOiJSUzI1NiJ9.",
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.",
    "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5",
    "jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1",
    "L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYE",
    "UipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
);
const RFC7515_A2_JWKS: &str = concat!(
    r#"{"keys":[{"kty":"RSA","kid":"2011-04-29","e":"AQAB","n":""#,
    "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4",
    "QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdb",
    "BYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-D",
    "WNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ",
    r#""}]}"#
);

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A JWK Set holding `key`'s public half (P-256), under `kid`.
fn jwks_of(key: &PrivateKey, kid: &str) -> String {
    let PublicKey::P256(public) = key.public_key() else {
        panic!("a P-256 key")
    };
    let point = public.to_encoded_point(false);
    format!(
        r#"{{"keys":[{{"kty":"EC","crv":"P-256","use":"sig","kid":"{kid}","x":"{}","y":"{}"}}]}}"#,
        b64(point.x().unwrap()),
        b64(point.y().unwrap())
    )
}

/// An ES256 token over `claims`, signed by `key` (JWS wants `r || s`, not DER).
fn es256(key: &PrivateKey, kid: &str, claims: &str) -> String {
    let header = b64(format!(r#"{{"alg":"ES256","typ":"JWT","kid":"{kid}"}}"#).as_bytes());
    let input = format!("{header}.{}", b64(claims.as_bytes()));
    let der = key.sign(input.as_bytes());
    let raw = p256::ecdsa::Signature::from_der(&der).unwrap().to_bytes();
    format!("{input}.{}", b64(&raw))
}

fn expect(now: i64) -> TokenExpectations<'static> {
    TokenExpectations {
        issuer: "https://accounts.google.com",
        audience: "https://ferry.example/v1/events",
        subject: "pubsub-push@project.iam.gserviceaccount.com",
        now,
        skew: 60,
    }
}

const CLAIMS: &str = r#"{"iss":"https://accounts.google.com","aud":"https://ferry.example/v1/events","email":"pubsub-push@project.iam.gserviceaccount.com","sub":"1234","iat":1000,"exp":4600}"#;

#[test]
fn rfc_7515_s_rs256_vector_verifies_and_an_altered_one_does_not() {
    let set = JwkSet::from_json(RFC7515_A2_JWKS.as_bytes()).unwrap();
    let claims = set.verify(RFC7515_A2_TOKEN).unwrap();
    assert_eq!(claims["iss"], "joe");
    assert_eq!(claims["exp"], 1300819380);
    // One character of the signature changed.
    let mut altered = RFC7515_A2_TOKEN.to_owned();
    altered.replace_range(altered.len() - 3..altered.len() - 2, "A");
    assert_eq!(
        set.verify(&altered).unwrap_err(),
        TrustError::BadSignature { what: "token" }
    );
    // The same token claiming to be HS256 or none is refused, whatever the key.
    let none = RFC7515_A2_TOKEN.replacen("eyJhbGciOiJSUzI1NiJ9", &b64(br#"{"alg":"none"}"#), 1);
    assert!(matches!(set.verify(&none), Err(TrustError::Token(_))));
}

#[test]
fn es256_tokens_verify_under_their_own_key_only() {
    let key = PrivateKey::generate_p256();
    let other = PrivateKey::generate_p256();
    let set = JwkSet::from_json(jwks_of(&key, "k1").as_bytes()).unwrap();
    let good = es256(&key, "k1", CLAIMS);
    let claims = set.verify(&good).unwrap();
    check_claims(&claims, &expect(2000)).unwrap();
    // Another key, under the same kid or none named: refused.
    assert!(set.verify(&es256(&other, "k1", CLAIMS)).is_err());
    // A kid the set does not hold: no key to try.
    assert!(set.verify(&es256(&key, "k2", CLAIMS)).is_err());
}

#[test]
fn claims_are_held_to_issuer_audience_subject_and_time() {
    let claims = |text: &str| match serde_json::from_str::<Value>(text).unwrap() {
        Value::Object(m) => m,
        _ => unreachable!(),
    };
    let good = claims(CLAIMS);
    assert!(check_claims(&good, &expect(2000)).is_ok());
    assert!(
        check_claims(&good, &expect(4600 + 60)).is_ok(),
        "within the skew"
    );
    assert!(check_claims(&good, &expect(4600 + 61)).is_err(), "expired");
    let other_aud = claims(&CLAIMS.replace("https://ferry.example/v1/events", "https://elsewhere"));
    assert!(check_claims(&other_aud, &expect(2000)).is_err());
    let listed = claims(&CLAIMS.replace(
        r#""aud":"https://ferry.example/v1/events""#,
        r#""aud":["x","https://ferry.example/v1/events"]"#,
    ));
    assert!(check_claims(&listed, &expect(2000)).is_ok());
    let other_iss = claims(&CLAIMS.replace("accounts.google.com", "evil.example"));
    assert!(check_claims(&other_iss, &expect(2000)).is_err());
    let by_sub = claims(&CLAIMS.replace("pubsub-push@project.iam.gserviceaccount.com", "someone"));
    assert!(check_claims(&by_sub, &expect(2000)).is_err());
    let future = claims(&CLAIMS.replace(r#""iat":1000"#, r#""nbf":3000"#));
    assert!(
        check_claims(&future, &expect(2000)).is_err(),
        "not yet valid"
    );
    let no_exp = claims(&CLAIMS.replace(r#","exp":4600"#, ""));
    assert!(check_claims(&no_exp, &expect(2000)).is_err(), "no expiry");
}

#[test]
fn hostile_tokens_and_key_sets_are_refused() {
    let key = PrivateKey::generate_p256();
    let set = JwkSet::from_json(jwks_of(&key, "k1").as_bytes()).unwrap();
    for token in ["", "a.b", "a.b.c.d", "!!.!!.!!", &"a".repeat(MAX_TOKEN + 1)] {
        assert!(set.verify(token).is_err(), "{token:.20}");
    }
    assert!(JwkSet::from_json(b"{}").is_err());
    assert!(JwkSet::from_json(br#"{"keys":[{"kty":"oct","k":"AAAA"}]}"#).is_err());
    assert!(JwkSet::from_json(br#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}"#).is_err());
    // A 1024-bit RSA modulus: too short to trust.
    let short = format!(
        r#"{{"keys":[{{"kty":"RSA","n":"{}","e":"AQAB"}}]}}"#,
        b64(&[0xc3; 128])
    );
    assert!(matches!(
        JwkSet::from_json(short.as_bytes()),
        Err(TrustError::UnsupportedKey(_))
    ));
    let many = format!(r#"{{"keys":[{}]}}"#, vec!["{}"; MAX_KEYS + 1].join(","));
    assert!(JwkSet::from_json(many.as_bytes()).is_err());
}
