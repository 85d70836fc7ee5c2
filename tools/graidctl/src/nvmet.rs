//! The kernel's NVMe-oF target (nvmet) through configfs (`/sys/kernel/config/nvmet/`), as
//! nvmetcli drives it (`drivers/nvme/target/configfs.c`). An exported array is a subsystem
//! named by its NQN holding one namespace (the array's block device), the hosts allowed to
//! connect to it, and its link into a port (transport, address, service id). Reading back what
//! configfs holds is how `detail` and `stop` learn that an array is exported, whoever set it up.

use serde::Serialize;
use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Where configfs shows nvmet once `nvmet` is loaded.
pub const NVMET_ROOT: &str = "/sys/kernel/config/nvmet";

/// The namespace id an array gets in its subsystem.
const NSID: &str = "1";

/// A fabric transport nvmet serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Tcp,
    Rdma,
}

impl Transport {
    /// configfs' `addr_trtype` word.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Rdma => "rdma",
        }
    }

    /// The kernel module serving it.
    pub fn module(self) -> &'static str {
        match self {
            Self::Tcp => "nvmet-tcp",
            Self::Rdma => "nvmet-rdma",
        }
    }
}

/// What to export an array as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSpec {
    pub nqn: String,
    pub transport: Transport,
    /// The addresses it listens on: one port each (more than one: paths for multipath).
    pub addrs: Vec<IpAddr>,
    pub port: u16,
    /// Host NQNs allowed to connect (empty with `allow_any_host`).
    pub hosts: Vec<String>,
    pub allow_any_host: bool,
    /// DH-HMAC-CHAP secrets (`DHHC-1:...`): the hosts' (they prove themselves with it) and the
    /// controller's (it proves itself to them: bidirectional).
    pub dhchap_secret: Option<String>,
    pub dhchap_ctrl_secret: Option<String>,
}

/// A port's address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listener {
    pub transport: String,
    pub addr: String,
    pub port: String,
}

impl Listener {
    /// `tcp 10.0.0.1:4420`, `rdma [fd00::1]:4420`.
    pub fn text(&self) -> String {
        if self.addr.contains(':') {
            format!("{} [{}]:{}", self.transport, self.addr, self.port)
        } else {
            format!("{} {}:{}", self.transport, self.addr, self.port)
        }
    }
}

/// An export found in configfs: a subsystem with a namespace on a block device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Export {
    pub nqn: String,
    /// The namespace's device, symlinks resolved (`/dev/graid0`).
    pub device: String,
    pub enabled: bool,
    pub listeners: Vec<Listener>,
    pub hosts: Vec<String>,
    pub allow_any_host: bool,
}

/// The default NQN of an array: NVMe's UUID form (no domain of ours needed), stable across
/// reboots and machines since the UUID is the array's.
pub fn default_nqn(uuid: &str) -> String {
    format!("nqn.2014-08.org.nvmexpress:uuid:{uuid}")
}

/// Whether `nqn` is well formed: NVMe's `nqn.yyyy-mm.reverse.domain:...` (or the UUID form),
/// at most 223 bytes, printable ASCII without `/` (it is a directory name in configfs).
pub fn valid_nqn(nqn: &str) -> bool {
    nqn.len() <= 223
        && nqn.starts_with("nqn.")
        && nqn.contains(':')
        && nqn.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

/// nvmet's configfs tree.
pub struct Nvmet {
    root: PathBuf,
}

/// One configfs step of an export, undone in reverse when a later one fails.
enum Undo {
    Rmdir(PathBuf),
    Unlink(PathBuf),
    Disable(PathBuf),
}

impl Nvmet {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn dir(&self, parts: &[&str]) -> PathBuf {
        parts.iter().fold(self.root.clone(), |p, part| p.join(part))
    }

    /// Every subsystem with a namespace, with its ports and hosts. `resolve` turns a namespace's
    /// device path into the device it names (symlinks followed).
    pub fn exports(&self, resolve: &dyn Fn(&str) -> String) -> Vec<Export> {
        let listeners = self.listeners();
        let mut out = Vec::new();
        for nqn in names(&self.dir(&["subsystems"])) {
            let subsys = self.dir(&["subsystems", &nqn]);
            for ns in names(&subsys.join("namespaces")) {
                let ns = subsys.join("namespaces").join(ns);
                let path = read(&ns.join("device_path"));
                if path.is_empty() {
                    continue;
                }
                out.push(Export {
                    nqn: nqn.clone(),
                    device: resolve(&path),
                    enabled: read(&ns.join("enable")) == "1",
                    listeners: listeners
                        .iter()
                        .filter(|(_, subsystems, _)| subsystems.contains(&nqn))
                        .map(|(_, _, l)| l.clone())
                        .collect(),
                    hosts: names(&subsys.join("allowed_hosts")),
                    allow_any_host: read(&subsys.join("attr_allow_any_host")) == "1",
                });
            }
        }
        out
    }

    /// Tells the hosts of subsystem `nqn` that its namespaces changed size (after a grow): nvmet
    /// reads each enabled namespace's device size again and sends its hosts the "namespace
    /// attribute changed" notice, so they see the new capacity without a reconnect.
    pub fn revalidate(&self, nqn: &str) -> io::Result<()> {
        let namespaces = self.dir(&["subsystems", nqn, "namespaces"]);
        for ns in names(&namespaces) {
            let ns = namespaces.join(ns);
            if read(&ns.join("enable")) == "1" {
                write(&ns.join("revalidate_size"), "1")?;
            }
        }
        Ok(())
    }

    /// Every port: its id, the subsystems linked into it, its address.
    fn listeners(&self) -> Vec<(String, Vec<String>, Listener)> {
        names(&self.dir(&["ports"]))
            .into_iter()
            .map(|id| {
                let port = self.dir(&["ports", &id]);
                let listener = Listener {
                    transport: read(&port.join("addr_trtype")),
                    addr: read(&port.join("addr_traddr")),
                    port: read(&port.join("addr_trsvcid")),
                };
                (id, names(&port.join("subsystems")), listener)
            })
            .collect()
    }

    /// Exports `device` (the array's block device) as `spec` says, with the array's UUID as the
    /// namespace's UUID and NGUID (multipath on the hosts knows it by them), `serial` and
    /// `model`. What it made is taken down again if a step fails.
    pub fn add(
        &self,
        spec: &ExportSpec,
        device: &str,
        uuid: &str,
        serial: &str,
        model: &str,
    ) -> io::Result<()> {
        let mut done = Vec::new();
        let result = self.add_steps(spec, device, uuid, serial, model, &mut done);
        if result.is_err() {
            for step in done.into_iter().rev() {
                // Best effort: the error that stopped the export is the one to report.
                let _ = match step {
                    Undo::Rmdir(p) => rmdir(&p),
                    Undo::Unlink(p) => fs::remove_file(p),
                    Undo::Disable(p) => fs::write(p, "0"),
                };
            }
        }
        result
    }

    fn add_steps(
        &self,
        spec: &ExportSpec,
        device: &str,
        uuid: &str,
        serial: &str,
        model: &str,
        done: &mut Vec<Undo>,
    ) -> io::Result<()> {
        let subsys = self.dir(&["subsystems", &spec.nqn]);
        step(fs::create_dir(&subsys), &subsys)?;
        done.push(Undo::Rmdir(subsys.clone()));
        let any = if spec.allow_any_host { "1" } else { "0" };
        write(&subsys.join("attr_allow_any_host"), any)?;
        write(&subsys.join("attr_serial"), serial)?;
        write(&subsys.join("attr_model"), model)?;

        let ns = subsys.join("namespaces").join(NSID);
        step(fs::create_dir_all(&ns), &ns)?;
        done.push(Undo::Rmdir(ns.clone()));
        write(&ns.join("device_path"), device)?;
        write(&ns.join("device_uuid"), uuid)?;
        write(&ns.join("device_nguid"), uuid)?;
        write(&ns.join("enable"), "1")?;
        done.push(Undo::Disable(ns.join("enable")));

        for host in &spec.hosts {
            let dir = self.dir(&["hosts", host]);
            if !dir.is_dir() {
                step(fs::create_dir_all(&dir), &dir)?;
                done.push(Undo::Rmdir(dir.clone()));
            }
            for (file, secret) in [
                ("dhchap_key", &spec.dhchap_secret),
                ("dhchap_ctrl_key", &spec.dhchap_ctrl_secret),
            ] {
                if let Some(secret) = secret {
                    if !dir.join(file).exists() {
                        return Err(io::Error::other(
                            "this kernel's nvmet has no DH-HMAC-CHAP (CONFIG_NVME_TARGET_AUTH)",
                        ));
                    }
                    write(&dir.join(file), secret)?;
                }
            }
            let link = subsys.join("allowed_hosts").join(host);
            step(symlink(&dir, &link), &link)?;
            done.push(Undo::Unlink(link));
        }

        for addr in &spec.addrs {
            let (id, fresh) = self.port_for(spec, addr)?;
            let port = self.dir(&["ports", &id]);
            if fresh {
                step(fs::create_dir_all(&port), &port)?;
                done.push(Undo::Rmdir(port.clone()));
                let adrfam = if addr.is_ipv4() { "ipv4" } else { "ipv6" };
                write(&port.join("addr_trtype"), spec.transport.name())?;
                write(&port.join("addr_adrfam"), adrfam)?;
                write(&port.join("addr_traddr"), &addr.to_string())?;
                write(&port.join("addr_trsvcid"), &spec.port.to_string())?;
            }
            // Linking the first subsystem into a port makes it listen: an address in use (or
            // not this machine's) fails here.
            let link = port.join("subsystems").join(&spec.nqn);
            step(symlink(&subsys, &link), &link)?;
            done.push(Undo::Unlink(link));
        }
        Ok(())
    }

    /// The port serving `addr` as `spec` says (an existing one, or a new id and `true`).
    fn port_for(&self, spec: &ExportSpec, addr: &IpAddr) -> io::Result<(String, bool)> {
        let want = Listener {
            transport: spec.transport.name().to_owned(),
            addr: addr.to_string(),
            port: spec.port.to_string(),
        };
        let ports = self.listeners();
        if let Some((id, _, _)) = ports.iter().find(|(_, _, l)| *l == want) {
            return Ok((id.clone(), false));
        }
        let next = ports
            .iter()
            .filter_map(|(id, _, _)| id.parse::<u16>().ok())
            .max()
            .map_or(Some(1), |m| m.checked_add(1))
            .ok_or_else(|| io::Error::other("every nvmet port id is taken"))?;
        Ok((next.to_string(), true))
    }

    /// Takes subsystem `nqn` down: out of its ports (a port left serving nothing goes), its
    /// hosts' links (a host no subsystem allows any more goes), its namespaces disabled and
    /// removed, then the subsystem.
    pub fn remove(&self, nqn: &str) -> io::Result<()> {
        for (id, subsystems, _) in self.listeners() {
            if !subsystems.iter().any(|s| s == nqn) {
                continue;
            }
            let port = self.dir(&["ports", &id]);
            let link = port.join("subsystems").join(nqn);
            step(fs::remove_file(&link), &link)?;
            if names(&port.join("subsystems")).is_empty()
                && names(&port.join("referrals")).is_empty()
            {
                step(rmdir(&port), &port)?;
            }
        }
        let subsys = self.dir(&["subsystems", nqn]);
        for host in names(&subsys.join("allowed_hosts")) {
            let link = subsys.join("allowed_hosts").join(&host);
            step(fs::remove_file(&link), &link)?;
            let allowed_elsewhere = names(&self.dir(&["subsystems"])).iter().any(|s| {
                self.dir(&["subsystems", s, "allowed_hosts", &host])
                    .exists()
            });
            if !allowed_elsewhere {
                let dir = self.dir(&["hosts", &host]);
                step(rmdir(&dir), &dir)?;
            }
        }
        for ns in names(&subsys.join("namespaces")) {
            let ns = subsys.join("namespaces").join(ns);
            write(&ns.join("enable"), "0")?;
            step(rmdir(&ns), &ns)?;
        }
        step(rmdir(&subsys), &subsys)
    }
}

/// The entries of directory `dir`, sorted (none if it cannot be read).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// An attribute's value, without its newline (empty if it cannot be read).
fn read(path: &Path) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim_end_matches('\n').to_owned())
        .unwrap_or_default()
}

/// Removes a configfs directory, whose attribute files go with it (the tests' scratch
/// directory stands in for configfs, where they must be removed first).
fn rmdir(path: &Path) -> io::Result<()> {
    if cfg!(test) {
        fs::remove_dir_all(path)
    } else {
        fs::remove_dir(path)
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    step(fs::write(path, value), path)
}

/// Links `link` to `target`. (configfs made the link's directory with its group; the tests'
/// scratch directory needs it made.)
fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    if let Some(dir) = link.parent() {
        fs::create_dir_all(dir)?;
    }
    std::os::unix::fs::symlink(target, link)
}

/// `result`, its error naming `path` (configfs' errors say little by themselves).
fn step(result: io::Result<()>, path: &Path) -> io::Result<()> {
    result.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory standing in for configfs (which makes a subsystem's `namespaces/`
    /// and `allowed_hosts/`, a port's `subsystems/`, by itself).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("graidctl-nvmet-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            for d in ["subsystems", "ports", "hosts"] {
                fs::create_dir_all(dir.join(d)).unwrap();
            }
            Self(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn spec(hosts: &[&str]) -> ExportSpec {
        ExportSpec {
            nqn: default_nqn("01234567-89ab-cdef-0123-456789abcdef"),
            transport: Transport::Tcp,
            addrs: vec!["127.0.0.1".parse().unwrap()],
            port: 4420,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            allow_any_host: hosts.is_empty(),
            dhchap_secret: None,
            dhchap_ctrl_secret: None,
        }
    }

    #[test]
    fn nqns_are_checked() {
        assert!(valid_nqn(&default_nqn(
            "01234567-89ab-cdef-0123-456789abcdef"
        )));
        assert!(valid_nqn("nqn.2024-01.com.example:web"));
        for bad in [
            "web",
            "nqn.2024-01.com.example",
            "nqn.x:a/b",
            "nqn.x:a b",
            "",
        ] {
            assert!(!valid_nqn(bad), "{bad}");
        }
        assert!(!valid_nqn(&format!("nqn.x:{}", "a".repeat(220))));
    }

    #[test]
    fn a_revalidation_asks_each_enabled_namespace_of_the_subsystem() {
        let scratch = Scratch::new("revalidate");
        let ns = |nqn: &str, n: &str| {
            scratch
                .0
                .join("subsystems")
                .join(nqn)
                .join("namespaces")
                .join(n)
        };
        for (nqn, n, enabled) in [("a", "1", "1"), ("a", "2", "0"), ("b", "1", "1")] {
            fs::create_dir_all(ns(nqn, n)).unwrap();
            fs::write(ns(nqn, n).join("enable"), enabled).unwrap();
        }
        Nvmet::new(&scratch.0).revalidate("a").unwrap();
        assert_eq!(read(&ns("a", "1").join("revalidate_size")), "1");
        assert!(
            !ns("a", "2").join("revalidate_size").exists(),
            "a disabled namespace"
        );
        assert!(
            !ns("b", "1").join("revalidate_size").exists(),
            "another subsystem"
        );
    }

    #[test]
    fn an_export_is_read_back_as_written() {
        let scratch = Scratch::new("add");
        let nvmet = Nvmet::new(&scratch.0);
        let s = spec(&[
            "nqn.2014-08.org.nvmexpress:uuid:aaaa",
            "nqn.2014-08.org.nvmexpress:uuid:bbbb",
        ]);
        nvmet
            .add(
                &s,
                "/dev/graid0",
                "01234567-89ab-cdef-0123-456789abcdef",
                "0123456789abcdef0123",
                "graid web",
            )
            .unwrap();
        let ns = scratch
            .0
            .join("subsystems")
            .join(&s.nqn)
            .join("namespaces/1");
        assert_eq!(read(&ns.join("device_path")), "/dev/graid0");
        assert_eq!(
            read(&ns.join("device_nguid")),
            "01234567-89ab-cdef-0123-456789abcdef"
        );
        assert_eq!(read(&scratch.0.join("ports/1/addr_trtype")), "tcp");
        assert_eq!(read(&scratch.0.join("ports/1/addr_adrfam")), "ipv4");
        let exports = nvmet.exports(&|p| p.to_owned());
        assert_eq!(
            exports,
            [Export {
                nqn: s.nqn.clone(),
                device: "/dev/graid0".into(),
                enabled: true,
                listeners: vec![Listener {
                    transport: "tcp".into(),
                    addr: "127.0.0.1".into(),
                    port: "4420".into()
                }],
                hosts: s.hosts.clone(),
                allow_any_host: false,
            }]
        );
        // A second array on the same address shares the port; another address gets the next.
        let mut other = spec(&[]);
        other.nqn = "nqn.2024-01.com.example:two".into();
        nvmet.add(&other, "/dev/graid1", "u", "s", "m").unwrap();
        other.nqn = "nqn.2024-01.com.example:three".into();
        other.port = 4421;
        nvmet.add(&other, "/dev/graid2", "u", "s", "m").unwrap();
        assert_eq!(names(&scratch.0.join("ports")), ["1", "2"]);
        assert_eq!(names(&scratch.0.join("ports/1/subsystems")).len(), 2);
        let exports = nvmet.exports(&|p| p.to_owned());
        assert!(exports.iter().any(|e| e.device == "/dev/graid2"
            && e.listeners[0].port == "4421"
            && e.allow_any_host));
        // Two addresses: a port each (the first shared with graid2's), both listed.
        other.nqn = "nqn.2024-01.com.example:four".into();
        other.addrs = vec!["127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()];
        nvmet.add(&other, "/dev/graid3", "u", "s", "m").unwrap();
        assert_eq!(names(&scratch.0.join("ports")), ["1", "2", "3"]);
        let four = nvmet.exports(&|p| p.to_owned());
        let four = four.iter().find(|e| e.device == "/dev/graid3").unwrap();
        let addrs: Vec<&str> = four.listeners.iter().map(|l| l.addr.as_str()).collect();
        assert_eq!(addrs, ["127.0.0.1", "127.0.0.2"]);
        // Taking it down leaves graid2's port and removes the one only it used.
        nvmet.remove(&other.nqn).unwrap();
        assert_eq!(names(&scratch.0.join("ports")), ["1", "2"]);
    }

    #[test]
    fn a_failed_step_takes_down_what_the_export_made() {
        let scratch = Scratch::new("undo");
        let nvmet = Nvmet::new(&scratch.0);
        let mut s = spec(&["nqn.2014-08.org.nvmexpress:uuid:aaaa"]);
        // No DH-HMAC-CHAP in this "kernel": the host has no dhchap_key attribute.
        s.dhchap_secret = Some("DHHC-1:00:secret:".into());
        let err = nvmet.add(&s, "/dev/graid0", "u", "s", "m").unwrap_err();
        assert!(err.to_string().contains("DH-HMAC-CHAP"), "{err}");
        assert!(
            names(&scratch.0.join("hosts")).is_empty(),
            "the host it made stayed"
        );
        assert!(
            nvmet.exports(&|p| p.to_owned()).is_empty(),
            "the namespace stayed"
        );
        assert!(names(&scratch.0.join("ports")).is_empty());
    }
}
