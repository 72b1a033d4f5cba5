//! The exporter's TLS (`--web.config.file` with `tls_server_config`): rustls with the ring
//! provider, TLS 1.2 and 1.3 (or 1.3 only), from the web config's PEM files.
use std::sync::Arc;

use super::webconfig::TlsConfig;
use anyhow::{anyhow, Context, Result};
use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    ServerConfig,
};

/// The server's TLS configuration from the web config's files.
pub fn server_config(t: &TlsConfig) -> Result<Arc<ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&t.cert_file)
        .and_then(|i| i.collect())
        .map_err(|e| anyhow!("cert_file {}: {e}", t.cert_file.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "cert_file {}: no PEM certificate in it",
            t.cert_file.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(&t.key_file)
        .map_err(|e| anyhow!("key_file {}: {e}", t.key_file.display()))?;
    let versions: &[&'static rustls::SupportedProtocolVersion] = match t.min_version.as_deref() {
        Some("TLS13") => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let c = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .context("the TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the certificate and key do not make a TLS server (does the key match?)")?;
    Ok(Arc::new(c))
}
