//! A headless Debian chromium driven over the Chrome DevTools Protocol on a pipe
//! (`--remote-debugging-pipe`: JSON messages ended by NUL, chromium reading fd 3 and
//! writing fd 4), so the tests need no WebSocket client: only std and serde_json.
//! Fails loudly when chromium is missing (tests/setup.sh installs it).

#![allow(dead_code)] // each test binary uses its own part of this

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

/// The browser binary (Debian's package `chromium`).
pub const CHROMIUM: &str = "chromium";

/// One chromium process and its DevTools pipe.
pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

/// One tab (a flat CDP session on a page target).
pub struct Tab {
    pub session: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Start headless chromium; panics naming the package when it is not installed.
    pub fn launch() -> Browser {
        Browser::launch_with(None, None)
    }

    /// [`Browser::launch`] with `HOME` set to `home` (where chromium finds its NSS
    /// certificate database, `.pki/nssdb`) and the profile's `Default/Preferences`
    /// starting as `preferences`.
    pub fn launch_with(home: Option<&std::path::Path>, preferences: Option<&Value>) -> Browser {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {CHROMIUM}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{CHROMIUM} is not installed: the web console's browser test needs it (apt-get install -y chromium; tests/setup.sh does it)"
        );
        let profile = tempfile::tempdir().expect("profile dir");
        if let Some(p) = preferences {
            let default = profile.path().join("Default");
            std::fs::create_dir_all(&default).expect("profile's Default dir");
            std::fs::write(default.join("Preferences"), p.to_string()).expect("Preferences");
        }
        let mut cmd = Command::new("sh");
        if let Some(h) = home {
            cmd.env("HOME", h);
        }
        // fd 3 <- our writes (its stdin), fd 4 -> our reads (its stdout); its own
        // stdout goes to stderr. `exec` keeps the pid ours to kill.
        let child = cmd
            .arg("-c")
            .arg("exec \"$0\" \"$@\" 3<&0 4>&1 0</dev/null 1>&2")
            .arg(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                "--window-size=1400,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromium");
        let mut child = child;
        let to = child.stdin.take().expect("pipe to chromium");
        let from = BufReader::new(child.stdout.take().expect("pipe from chromium"));
        Browser {
            child,
            to,
            from,
            next_id: 0,
            _profile: profile,
        }
    }

    /// Send `method` (on `session`, or the browser) and wait for its answer; events
    /// in between are skipped. Panics on a CDP error.
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = Value::from(s);
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        self.to.flush().expect("flush to chromium");
        loop {
            let mut buf = Vec::new();
            let n = self
                .from
                .read_until(0, &mut buf)
                .expect("read from chromium");
            assert!(
                n > 0,
                "chromium closed its DevTools pipe (crashed?) during {method}"
            );
            buf.pop();
            let v: Value = serde_json::from_slice(&buf).expect("CDP message is JSON");
            if v["id"].as_u64() == Some(id) {
                assert!(v.get("error").is_none(), "CDP {method}: {}", v["error"]);
                return v["result"].clone();
            }
        }
    }

    /// A new tab on `url`, attached.
    pub fn open(&mut self, url: &str) -> Tab {
        let target = self.call(None, "Target.createTarget", json!({"url": url}));
        let id = target["targetId"].as_str().expect("targetId").to_string();
        let att = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": id, "flatten": true}),
        );
        let session = att["sessionId"].as_str().expect("sessionId").to_string();
        Tab { session }
    }

    /// Evaluate `expr` in the tab (promises awaited) and return its value.
    pub fn eval(&mut self, tab: &Tab, expr: &str) -> Value {
        let r = self.call(
            Some(&tab.session),
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expr}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Wait until `expr` is true in the tab; panics with `what` and the page's text
    /// after `limit` (a bound against hanging, not a timing assertion).
    pub fn wait_for(&mut self, tab: &Tab, what: &str, expr: &str, limit: Duration) -> Duration {
        let start = Instant::now();
        // A page still loading has no such element yet: that is "not yet".
        let guarded =
            format!("(() => {{ try {{ return ({expr}); }} catch (e) {{ return false; }} }})()");
        loop {
            if self.eval(tab, &guarded) == Value::Bool(true) {
                return start.elapsed();
            }
            if start.elapsed() > limit {
                let body = self.eval(tab, "document.body ? document.body.innerText : ''");
                panic!(
                    "the page never showed {what} ({expr}); it shows:\n{}",
                    body.as_str().unwrap_or("")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A PNG of the tab's viewport, written to `path`.
    pub fn screenshot(&mut self, tab: &Tab, path: &std::path::Path) {
        let r = self.call(
            Some(&tab.session),
            "Page.captureScreenshot",
            json!({"format": "png"}),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("screenshot data"))
            .expect("screenshot is base64");
        std::fs::write(path, png).expect("write screenshot");
        eprintln!("screenshot: {}", path.display());
    }
}
