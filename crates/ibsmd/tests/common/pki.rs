//! A test PKI made at test time (rcgen): a CA (`ca.pem`), a server certificate for
//! `localhost` (`server.crt`/`server.key`), one client certificate per name asked for
//! (`NAME.crt`/`NAME.key`, signed by the CA), and `stranger`, a client certificate from
//! an unrelated CA, all PEM files in a temporary directory.

use std::path::PathBuf;

/// The PKI's files (removed with it).
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A file of the PKI (`ca.pem`, `server.crt`, `NAME.key`, ...).
    pub fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join(f)
    }

    /// The CA, the server, a client certificate for each of `clients`, and `stranger`.
    pub fn new(clients: &[&str]) -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, KeyUsagePurpose,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: String| {
            std::fs::write(dir.path().join(name), text).expect("write pem");
        };
        let make_ca = |cn: &str| {
            let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.distinguished_name.push(DnType::CommonName, cn);
            p.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            CertifiedIssuer::self_signed(p, KeyPair::generate().expect("key")).expect("CA")
        };
        let ca = make_ca("ibsm test CA");
        let other_ca = make_ca("unrelated CA");
        write("ca.pem", ca.pem());
        let leaf = |sans: Vec<String>, eku: ExtendedKeyUsagePurpose, issuer: &_, name: &str| {
            let key = KeyPair::generate().expect("key");
            let mut p = CertificateParams::new(sans).expect("params");
            p.distinguished_name.push(DnType::CommonName, name);
            p.extended_key_usages = vec![eku];
            let cert = p.signed_by(&key, issuer).expect("sign");
            write(&format!("{name}.crt"), cert.pem());
            write(&format!("{name}.key"), key.serialize_pem());
        };
        leaf(
            vec!["localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            &*ca,
            "server",
        );
        for name in clients {
            leaf(vec![], ExtendedKeyUsagePurpose::ClientAuth, &*ca, name);
        }
        leaf(
            vec![],
            ExtendedKeyUsagePurpose::ClientAuth,
            &*other_ca,
            "stranger",
        );
        Pki { dir }
    }
}
