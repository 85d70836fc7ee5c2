//! graid-logreplay's command line on a synthetic log and a file as the target.

use graid_logreplay::synth::{pattern, LogBuilder};
use std::path::PathBuf;
use std::process::Command;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("graid-logreplay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, f: &str) -> String {
        self.0.join(f).to_str().unwrap().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tool(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_graid-logreplay"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lists_finds_and_replays_in_steps() {
    let d = Dir::new("cli");
    let mut b = LogBuilder::new(512);
    b.mark("r0")
        .write(4, &pattern(512, 2, 0x10))
        .preflush(0)
        .fua(0, &pattern(512, 1, 0x20))
        .mark("r1")
        .write(5, &pattern(512, 1, 0x30))
        .flush()
        .mark("r2");
    let (log, target) = (d.path("log"), d.path("target"));
    std::fs::write(&log, b.finish(None)).unwrap();
    std::fs::write(&target, vec![0u8; 8 * 512]).unwrap();

    let (ok, out, _) = tool(&["info", &log]);
    assert!(
        ok && out.contains("entries 8") && out.contains("sectorsize 512"),
        "{out}"
    );
    let (ok, out, _) = tool(&["list", &log]);
    assert!(ok);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "0 mark 0 0 r0");
    assert_eq!(lines[1], "1 - 4 2");
    assert_eq!(lines[2], "2 flush,fua,meta 0 0");
    assert_eq!(lines[3], "3 fua 0 1");
    let (ok, out, _) = tool(&["mark", &log, "r1"]);
    assert!(ok && out.trim() == "4", "{out}");
    let (ok, _, err) = tool(&["mark", &log, "r9"]);
    assert!(!ok && err.contains("no mark 'r9'"), "{err}");
    let (ok, out, _) = tool(&["events", &log, "--from-mark", "r0", "--to-mark", "r2"]);
    assert!(ok && out == "2 1 4 0\n6 5 7 -\n", "{out}");
    let (ok, out, _) = tool(&["events", &log, "--from-mark", "r1", "--to-mark", "r2"]);
    assert!(ok && out == "6 5 7 -\n", "{out}");

    // To r1, then on from r1 to the end: the same as one replay of everything.
    let (ok, out, err) = tool(&["replay", &log, &target, "--to-mark", "r1"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("replayed entries 0..4: 2 writes (1536 bytes)"),
        "{out}"
    );
    let dev = std::fs::read(&target).unwrap();
    assert_eq!(&dev[4 * 512..6 * 512], pattern(512, 2, 0x10).as_slice());
    assert_eq!(&dev[..512], pattern(512, 1, 0x20).as_slice());
    assert!(dev[6 * 512..].iter().all(|&x| x == 0));
    let (ok, _, err) = tool(&["replay", &log, &target, "--from-mark", "r1", "--to-end"]);
    assert!(ok, "{err}");
    let stepped = std::fs::read(&target).unwrap();
    let whole = d.path("whole");
    std::fs::write(&whole, vec![0u8; 8 * 512]).unwrap();
    assert!(tool(&["replay", &log, &whole, "--to", "8", "--sync-each"]).0);
    assert_eq!(stepped, std::fs::read(&whole).unwrap());
    assert_eq!(&stepped[5 * 512..6 * 512], pattern(512, 1, 0x30).as_slice());

    // Nothing to stop at, a range backwards, a log that is not one.
    let (ok, _, err) = tool(&["replay", &log, &target]);
    assert!(!ok && err.contains("say where to stop"), "{err}");
    let (ok, _, err) = tool(&["replay", &log, &target, "--from", "5", "--to", "2"]);
    assert!(!ok && err.contains("not a range"), "{err}");
    let (ok, _, err) = tool(&["info", &target]);
    assert!(!ok && err.contains("not a dm-log-writes log"), "{err}");
}
