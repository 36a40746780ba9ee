//! Each scheme lets in what its sender signs and nothing forged: a wrong secret, another
//! body, a token from another key, for another audience, or expired.

use super::*;
use ferry_config::OidcSender;
use ferry_trust::PrivateKey;

const TOKEN: &str = "bearer-token-0123456789abcdef";
const PATH: &str = "path-secret-0123456789abcdef";
const GITHUB: &str = "github-secret-0123456789";
const JFROG: &str = "jfrog-secret-0123456789";
const NEXUS: &str = "nexus-secret-0123456789";
const BODY: &[u8] = br#"{"events":[]}"#;

fn settings(oidc: Vec<OidcSender>) -> EventsSettings {
    EventsSettings {
        token: Some(Secret::new(TOKEN)),
        path_secret: Some(Secret::new(PATH)),
        github: Some(Secret::new(GITHUB)),
        jfrog: Some(Secret::new(JFROG)),
        nexus: Some(Secret::new(NEXUS)),
        oidc,
        queue: 8,
    }
}

fn judged(s: &EventsSettings, p: Presented<'_>) -> Verdict {
    judge(s, &p, &|_| None, 2000)
}

fn body(p: Presented<'static>) -> Presented<'static> {
    Presented { body: BODY, ..p }
}

fn hmac256(key: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

fn hmac1(key: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha1>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

#[test]
fn bearer_and_path_secret() {
    let s = settings(Vec::new());
    let bearer = format!("Bearer {TOKEN}");
    let p = Presented {
        authorization: Some(bearer.as_bytes()),
        body: BODY,
        ..Presented::default()
    };
    assert_eq!(judged(&s, p), Verdict::Allowed(Scheme::Token));
    let wrong = format!("Bearer {TOKEN}x");
    let p = Presented {
        authorization: Some(wrong.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, p), Verdict::Unauthorized);
    assert_eq!(
        judged(&s, body(Presented::default())),
        Verdict::Unauthorized
    );
    let path = Presented {
        path_secret: Some(PATH),
        ..Presented::default()
    };
    assert_eq!(judged(&s, path), Verdict::Allowed(Scheme::PathSecret));
    let wrong_path = Presented {
        path_secret: Some("path-secret-0123456789abcdeF"),
        ..Presented::default()
    };
    assert_eq!(judged(&s, wrong_path), Verdict::NotFound);
    // A path secret when none is configured is 404 too, even with a good bearer token.
    let none = EventsSettings {
        path_secret: None,
        ..s.clone()
    };
    let both = Presented {
        path_secret: Some(PATH),
        authorization: Some(bearer.as_bytes()),
        ..Presented::default()
    };
    assert_eq!(judged(&none, both), Verdict::NotFound);
}

#[test]
fn each_sender_s_signature_under_its_own_key_only() {
    let s = settings(Vec::new());
    let github = format!("sha256={}", hmac256(GITHUB, BODY));
    let p = body(Presented::default());
    let gh = Presented {
        github: Some(github.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, gh), Verdict::Allowed(Scheme::GitHub));
    let other_body = Presented { body: b"{ }", ..gh };
    assert_eq!(judged(&s, other_body), Verdict::Unauthorized);
    // Keyed with the bearer token: only when no hmac.github is set (the documented fallback).
    let by_token = format!("sha256={}", hmac256(TOKEN, BODY));
    let gh_token = Presented {
        github: Some(by_token.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, gh_token), Verdict::Unauthorized);
    let no_github = EventsSettings {
        github: None,
        ..s.clone()
    };
    assert_eq!(
        judged(&no_github, gh_token),
        Verdict::Allowed(Scheme::GitHub)
    );

    let signed = hmac256(JFROG, BODY);
    let jf = Presented {
        jfrog: Some(signed.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, jf), Verdict::Allowed(Scheme::JFrog));
    let plain = Presented {
        jfrog: Some(JFROG.as_bytes()),
        ..p
    };
    assert_eq!(
        judged(&s, plain),
        Verdict::Allowed(Scheme::JFrog),
        "the token as the header"
    );
    let forged = hmac256("jfrog-secret-0123456780", BODY);
    let jf = Presented {
        jfrog: Some(forged.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, jf), Verdict::Unauthorized);

    let signed = hmac1(NEXUS, BODY);
    let nx = Presented {
        nexus: Some(signed.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, nx), Verdict::Allowed(Scheme::Nexus));
    let sha256_instead = hmac256(NEXUS, BODY);
    let nx = Presented {
        nexus: Some(sha256_instead.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, nx), Verdict::Unauthorized);
    // A signature under another sender's header is not let in by that sender's key.
    let github_as_nexus = hmac1(GITHUB, BODY);
    let nx = Presented {
        nexus: Some(github_as_nexus.as_bytes()),
        ..p
    };
    assert_eq!(judged(&s, nx), Verdict::Unauthorized);
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An ES256 JWT over `claims`, signed by `key`.
fn jwt(key: &PrivateKey, claims: &str) -> String {
    let input = format!(
        "{}.{}",
        b64(br#"{"alg":"ES256","typ":"JWT","kid":"k"}"#),
        b64(claims.as_bytes())
    );
    let der = key.sign(input.as_bytes());
    let raw = p256::ecdsa::Signature::from_der(&der).unwrap().to_bytes();
    format!("{input}.{}", b64(&raw))
}

fn jwks(key: &PrivateKey) -> JwkSet {
    let ferry_trust::PublicKey::P256(k) = key.public_key() else {
        unreachable!()
    };
    let point = k.to_encoded_point(false);
    let text = format!(
        r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"k","x":"{}","y":"{}"}}]}}"#,
        b64(point.x().unwrap()),
        b64(point.y().unwrap())
    );
    JwkSet::from_json(text.as_bytes()).unwrap()
}

#[test]
fn oidc_tokens_from_the_configured_issuer_key_audience_and_subject_only() {
    let key = PrivateKey::generate_p256();
    let other = PrivateKey::generate_p256();
    let sender = OidcSender {
        issuer: "https://accounts.google.com".into(),
        audience: "https://ferry.example/v1/events".into(),
        subject: "push@p.iam.gserviceaccount.com".into(),
        keys: OidcKeys::File {
            path: "jwks.json".into(),
            set: jwks(&key),
        },
    };
    let s = EventsSettings {
        token: None,
        ..settings(vec![sender])
    };
    let claims = r#"{"iss":"https://accounts.google.com","aud":"https://ferry.example/v1/events","email":"push@p.iam.gserviceaccount.com","exp":3000,"iat":1000}"#;
    let verdict = |token: String| {
        let header = format!("Bearer {token}");
        judge(
            &s,
            &Presented {
                authorization: Some(header.as_bytes()),
                body: BODY,
                ..Presented::default()
            },
            &|_| None,
            2000,
        )
    };
    assert_eq!(verdict(jwt(&key, claims)), Verdict::Allowed(Scheme::Oidc));
    assert_eq!(
        verdict(jwt(&other, claims)),
        Verdict::Unauthorized,
        "another key"
    );
    let aud = claims.replace("https://ferry.example/v1/events", "https://other.example");
    assert_eq!(
        verdict(jwt(&key, &aud)),
        Verdict::Unauthorized,
        "another audience"
    );
    let expired = claims.replace("3000", "1900");
    assert_eq!(
        verdict(jwt(&key, &expired)),
        Verdict::Unauthorized,
        "expired"
    );
    let subject = claims.replace("push@", "else@");
    assert_eq!(
        verdict(jwt(&key, &subject)),
        Verdict::Unauthorized,
        "another subject"
    );
    let issuer = claims.replace("accounts.google.com", "accounts.example");
    assert_eq!(
        verdict(jwt(&key, &issuer)),
        Verdict::Unauthorized,
        "another issuer"
    );
}
