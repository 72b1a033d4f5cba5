//! The exporter's web configuration file, in the format Prometheus exporters share
//! (`--web.config.file`, as node_exporter reads it through exporter-toolkit): TLS from a
//! certificate and key file, and basic auth users with bcrypt hashes. Keys this tool does not
//! implement (client certificates, cipher suites, HTTP/2 settings) are refused by name, never
//! ignored. Pure: text in, checks out.
use std::{collections::BTreeMap, path::PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    #[serde(default)]
    pub tls_server_config: Option<TlsConfig>,
    /// user -> bcrypt hash (`htpasswd -nBC 10 USER`, `python3 -c 'import bcrypt; ...'`)
    #[serde(default)]
    pub basic_auth_users: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain and key; relative paths are from the config file's directory
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// `TLS12` or `TLS13` (default TLS12, as exporter-toolkit)
    #[serde(default)]
    pub min_version: Option<String>,
}

impl WebConfig {
    /// Parses the file's text; `dir` is the file's directory (relative paths resolve there).
    pub fn parse(text: &str, dir: &std::path::Path) -> Result<WebConfig> {
        let mut c: WebConfig = serde_yaml_ng::from_str(text).map_err(|e| {
            let msg = e.to_string();
            let hint = if msg.contains("unknown field") {
                " (tcpwin-trace reads tls_server_config: cert_file, key_file, min_version; and basic_auth_users)"
            } else {
                ""
            };
            anyhow::anyhow!("the web config: {msg}{hint}")
        })?;
        if let Some(t) = c.tls_server_config.as_mut() {
            for p in [&mut t.cert_file, &mut t.key_file] {
                if p.is_relative() {
                    *p = dir.join(&*p);
                }
            }
            if let Some(v) = &t.min_version {
                if !matches!(v.as_str(), "TLS12" | "TLS13") {
                    bail!("the web config: min_version {v}: TLS12 or TLS13");
                }
            }
        }
        for (user, hash) in &c.basic_auth_users {
            if !hash.starts_with("$2") {
                bail!("the web config: basic_auth_users.{user} is not a bcrypt hash ($2a$/$2b$/$2y$...): store the hash, never the password");
            }
        }
        Ok(c)
    }

    /// Whether a request's `Authorization` header is allowed (every request is, without users).
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        if self.basic_auth_users.is_empty() {
            return true;
        }
        let Some((user, password)) = authorization.and_then(basic_credentials) else {
            return false;
        };
        self.basic_auth_users
            .get(&user)
            .is_some_and(|hash| bcrypt::verify(&password, hash).unwrap_or(false))
    }
}

/// `Basic base64(user:password)` -> (user, password).
pub fn basic_credentials(header: &str) -> Option<(String, String)> {
    use base64::Engine;
    let b64 = header.trim().strip_prefix("Basic ")?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// Reads and parses the file at `path`.
pub fn load(path: &std::path::Path) -> Result<WebConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--web.config.file {}: cannot read it", path.display()))?;
    WebConfig::parse(&text, path.parent().unwrap_or(std::path::Path::new(".")))
        .with_context(|| format!("--web.config.file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn reads_the_exporters_format_and_refuses_what_it_does_not_do() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let text = format!(
            "# as node_exporter's\ntls_server_config:\n  cert_file: tls.crt\n  key_file: /etc/k.key\nbasic_auth_users:\n  prometheus: '{hash}'\n"
        );
        let c = WebConfig::parse(&text, Path::new("/etc/tcpwin")).unwrap();
        let t = c.tls_server_config.as_ref().unwrap();
        assert_eq!(t.cert_file, Path::new("/etc/tcpwin/tls.crt"));
        assert_eq!(t.key_file, Path::new("/etc/k.key"));
        use base64::Engine;
        let header = |u: &str, p: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        };
        assert!(c.allows(Some(&header("prometheus", "s3cret"))));
        assert!(!c.allows(Some(&header("prometheus", "wrong"))));
        assert!(!c.allows(Some(&header("other", "s3cret"))));
        assert!(!c.allows(None));
        assert!(!c.allows(Some("Bearer x")));
        // no users: every request
        assert!(WebConfig::default().allows(None));
        // what it does not implement, by name
        let e = WebConfig::parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
            Path::new("/"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("client_ca_file"), "{e}");
        let e = WebConfig::parse("basic_auth_users:\n  u: plain\n", Path::new("/"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a bcrypt hash"), "{e}");
        let e = WebConfig::parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: SSL3\n",
            Path::new("/"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("TLS12 or TLS13"), "{e}");
    }
}
