//! The one place that knows registries' quirks by host: which meter reads and writes apart, which
//! is ECR. docs/registries.md carries the evidence for each (upload limits are learned instead).

/// Registries that throttle reads and writes with separate quotas get a window per class.
pub fn split_read_write(host: &str) -> bool {
    is_ecr(host) || host.ends_with(".azurecr.io")
}

/// `<account>.dkr.ecr.<region>.amazonaws.com`.
pub fn is_ecr(host: &str) -> bool {
    let h = host.split(':').next().unwrap_or(host);
    h.contains(".dkr.ecr.") && (h.ends_with(".amazonaws.com") || h.ends_with(".amazonaws.com.cn"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecr_and_acr_split_their_windows() {
        assert!(split_read_write(
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
        ));
        assert!(split_read_write("myreg.azurecr.io"));
        assert!(!split_read_write("ghcr.io"));
        assert!(!split_read_write("docker.io"));
    }
}
