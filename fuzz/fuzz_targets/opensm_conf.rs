//! Feeds arbitrary text to `ibsmctl import-opensm`'s converter (an OpenSM opensm.conf).
//! Invariants: a refusal names lines inside the text; an accepted file's output is a
//! config ibsmd's own parser (`FileConfig::parse`) accepts, every option of the input is
//! either mapped or listed with a reason, and the conversion is deterministic.
//!
//! ibsmctl is a binary crate; its converter uses std alone, so it is included here by
//! path rather than made a library of its own.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/ibsmctl/src/import_opensm.rs"]
mod import_opensm;

use import_opensm::{import, Host};

/// Every file it names exists and holds a root GUID (so root_guid, partitions_file
/// and guid2lid are produced from the input's paths too).
struct AnyFile;

impl Host for AnyFile {
    fn read(&self, _path: &Path) -> std::io::Result<String> {
        Ok("0x0002c90000000100\n".into())
    }

    fn cache_dir(&self) -> PathBuf {
        PathBuf::from("/var/cache/opensm")
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/etc/opensm/opensm.conf");
    match import(path, text, &AnyFile) {
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in &errors {
                if e.path == path {
                    assert!(e.line >= 1 && e.line <= text.lines().count(), "{e}");
                }
            }
        }
        Ok(got) => {
            let options = text
                .lines()
                .filter(|l| !l.split('#').next().unwrap_or("").trim().is_empty())
                .count();
            assert_eq!(got.mapped + got.unmapped.len(), options, "{text:?}");
            assert!(got.unmapped.iter().all(|u| !u.3.is_empty()));
            if let Err(e) = ibsmd::config::FileConfig::parse(Path::new("out.toml"), &got.toml) {
                panic!("ibsmd refuses the converted config: {e}\n{}", got.toml);
            }
            assert_eq!(import(path, text, &AnyFile).ok(), Some(got));
        }
    }
});
