//! The web console over HTTPS in a real browser: `ibsmd --web` with an API secured by
//! client certificates alone (`--tls-cert/--tls-key/--tls-client-ca`,
//! `--read-only-client-name reader`). Chromium gets its certificate the way a user's
//! does: an NSS database under `$HOME/.pki/nssdb` (certutil/pk12util, Debian's
//! libnss3-tools) holding the client certificate and trusting the test CA, and the
//! `AutoSelectCertificateForUrls` setting for the console's origin in the profile's
//! preferences, so headless chromium presents it without a chooser. The page then
//! signs in with no token: the admin sees the actions, the reader none, and a browser
//! without a certificate gets the login form with the server's reason.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

mod cdp;
mod common;
use cdp::Browser;
use common::{free_port, Reaped, IBSMD};

const LIMIT: Duration = Duration::from_secs(60);

fn run(dir: &Path, prog: &str, args: &[&str]) {
    let out = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("{prog} did not run ({e}): the HTTPS browser test needs openssl and libnss3-tools (tests/setup.sh installs them)")
        });
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, `server` for localhost, clients `admin` and `reader`, in `dir` (openssl).
fn make_pki(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=ibsm web test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=keyCertSign,digitalSignature",
    ]);
    run(dir, "openssl", &ca);
    for (name, ext) in [
        (
            "server",
            "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n",
        ),
        ("admin", "extendedKeyUsage=clientAuth\n"),
        ("reader", "extendedKeyUsage=clientAuth\n"),
    ] {
        let (key, csr, crt, ext_file) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        std::fs::write(dir.join(&ext_file), ext).expect("ext file");
        let subj = format!("/CN={name}");
        let mut req = vec!["req"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        run(dir, "openssl", &req);
        run(
            dir,
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext_file,
            ],
        );
    }
}

/// A `$HOME` whose NSS database trusts the test CA and holds `who`'s certificate.
fn browser_home(dir: &Path, who: Option<&str>) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("home");
    let db_dir = home.path().join(".pki/nssdb");
    std::fs::create_dir_all(&db_dir).expect("nssdb dir");
    let db = format!("sql:{}", db_dir.display());
    run(dir, "certutil", &["-N", "-d", &db, "--empty-password"]);
    run(
        dir,
        "certutil",
        &[
            "-A",
            "-n",
            "ibsm-test-ca",
            "-t",
            "C,,",
            "-i",
            "ca.pem",
            "-d",
            &db,
        ],
    );
    if let Some(w) = who {
        let p12 = format!("{w}.p12");
        run(
            dir,
            "openssl",
            &[
                "pkcs12",
                "-export",
                "-in",
                &format!("{w}.crt"),
                "-inkey",
                &format!("{w}.key"),
                "-out",
                &p12,
                "-passout",
                "pass:",
            ],
        );
        run(dir, "pk12util", &["-i", &p12, "-d", &db, "-W", ""]);
    }
    home
}

/// Chromium presenting `who`'s certificate to `origin` without asking.
fn browser(dir: &Path, who: Option<&str>, origin: &str) -> (Browser, tempfile::TempDir) {
    let home = browser_home(dir, who);
    let prefs = serde_json::json!({"profile": {"content_settings": {"exceptions": {
        "auto_select_certificate": {format!("{origin},*"): {"setting": {"filters": [{}]}}}
    }}}});
    (Browser::launch_with(Some(home.path()), Some(&prefs)), home)
}

#[test]
fn a_client_certificate_signs_the_browser_in_with_its_role() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_pki(dir.path());
    let (grpc, web) = (free_port(), free_port());
    let pem = |f: &str| dir.path().join(f);
    let child = Command::new(IBSMD)
        .args(["--fabric", "gen:fat-tree:4", "--priority", "5"])
        .args(["--grpc", &format!("127.0.0.1:{grpc}")])
        .args(["--web", &format!("127.0.0.1:{web}")])
        .arg("--tls-cert")
        .arg(pem("server.crt"))
        .arg("--tls-key")
        .arg(pem("server.key"))
        .arg("--tls-client-ca")
        .arg(pem("ca.pem"))
        .args(["--read-only-client-name", "reader"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ibsmd");
    let _daemon = Reaped(child);
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", web)).is_err() {
        assert!(start.elapsed() < LIMIT, "the console never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    let origin = format!("https://localhost:{web}");
    let shots = shots();

    // The admin's certificate: no login form, the admin's actions.
    let (mut b, _home) = browser(dir.path(), Some("admin"), &origin);
    let tab = b.open(&format!("{origin}/"));
    b.wait_for(&tab, "the cluster, signed in by the certificate",
        "document.body.dataset.certificate === 'yes' && document.getElementById('login').hidden && document.querySelectorAll('#instances tr[data-state=MASTER]').length === 1",
        LIMIT);
    assert_eq!(b.eval(&tab, "document.body.dataset.role"), "admin");
    assert_eq!(
        b.eval(&tab, "document.getElementById('role').textContent"),
        "admin (client certificate)"
    );
    b.wait_for(
        &tab,
        "the admin's actions",
        "document.querySelectorAll('#instances button.action').length >= 3",
        LIMIT,
    );
    b.screenshot(&tab, &shots.join("8-https-certificate-admin.png"));
    drop(b);

    // A certificate named in --read-only-client-name: the same view, no action.
    let (mut b, _home) = browser(dir.path(), Some("reader"), &origin);
    let tab = b.open(&format!("{origin}/"));
    b.wait_for(
        &tab,
        "the cluster for the reader",
        "document.body.dataset.role === 'read-only' && document.querySelectorAll('#instances tr[data-state=MASTER]').length === 1",
        LIMIT,
    );
    assert_eq!(
        b.eval(&tab, "document.querySelectorAll('button.action').length"),
        0,
        "a read-only certificate sees action buttons"
    );
    b.screenshot(&tab, &shots.join("9-https-certificate-read-only.png"));
    drop(b);

    // No certificate: the page loads and says why nothing else does.
    let (mut b, _home) = browser(dir.path(), None, &origin);
    let tab = b.open(&format!("{origin}/"));
    b.wait_for(
        &tab,
        "the refusal without a certificate",
        "!document.getElementById('login').hidden && document.getElementById('login-error').textContent.includes('client certificate')",
        LIMIT,
    );
    b.screenshot(&tab, &shots.join("10-https-no-certificate.png"));
}

fn shots() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
        });
    let dir = target.join("web-console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}
