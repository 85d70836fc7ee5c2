//! `graidctl export` and `unexport`: a running array as a namespace of the kernel's NVMe-oF
//! target (`nvmet.rs`), reachable by the hosts named (by host NQN) over TCP or RDMA. Each
//! export is kept in `/etc/graid/exports.conf`, so it comes back whenever the array starts
//! again: `export --restore`, which `graid-export@.service` runs as udev sees an array start.

use crate::array_ref::{self, resolve};
use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::member::System;
use crate::nvmet::{default_nqn, valid_nqn, Export, ExportSpec, Nvmet, Transport, NVMET_ROOT};
use crate::output::{json, running_views, ArrayView};
use serde::Serialize;
use std::fs;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Where exports are kept (written whole by graidctl, readable by root only: it may hold
/// DH-HMAC-CHAP secrets).
pub const EXPORTS_PATH: &str = "/etc/graid/exports.conf";

/// The arguments of `graidctl export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The array (see ARRAY below); with --restore, only its exports.
    #[arg(required_unless_present = "restore")]
    array: Option<String>,
    /// The fabric: tcp, or rdma (an RDMA NIC, or soft-RoCE: rdma_rxe).
    #[arg(long, value_enum, default_value = "tcp")]
    transport: Transport,
    /// A local address to listen on (IPv4 or IPv6); repeat for more paths (one port each: a
    /// host's multipath sees one namespace over all of them).
    #[arg(long, required_unless_present = "restore")]
    addr: Vec<IpAddr>,
    /// The port (TCP port or RDMA service id); NVMe-oF's is 4420.
    #[arg(long, default_value_t = 4420)]
    port: u16,
    /// The subsystem's NQN [default: nqn.2014-08.org.nvmexpress:uuid:ARRAY-UUID].
    #[arg(long)]
    nqn: Option<String>,
    /// A host NQN allowed to connect (repeat for more); only they can.
    #[arg(long = "allow-host", value_name = "HOSTNQN")]
    allow_hosts: Vec<String>,
    /// Let any host connect (no access control).
    #[arg(long, conflicts_with = "allow_hosts")]
    allow_any_host: bool,
    /// DH-HMAC-CHAP: the secret the allowed hosts authenticate with (DHHC-1:..., from `nvme
    /// gen-dhchap-key`).
    #[arg(long, value_name = "DHHC-1:...", requires = "allow_hosts")]
    dhchap_secret: Option<String>,
    /// DH-HMAC-CHAP: the secret the target authenticates itself with to the hosts.
    #[arg(long, value_name = "DHHC-1:...", requires = "dhchap_secret")]
    dhchap_ctrl_secret: Option<String>,
    /// Export again what exports.conf keeps for the running arrays (all, or ARRAY's) that are
    /// not exported now.
    #[arg(long, conflicts_with_all = ["addr", "nqn", "allow_hosts", "allow_any_host", "dhchap_secret"])]
    restore: bool,
}

/// One line of exports.conf: an array (by UUID) and how it is exported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    pub uuid: String,
    pub name: String,
    pub spec: ExportSpec,
}

impl Kept {
    fn line(&self) -> String {
        let s = &self.spec;
        let mut line = format!(
            "EXPORT {} name={} nqn={} transport={} addr={} port={}",
            self.uuid,
            // For people and `unexport NAME` of a stopped array; the UUID is what counts.
            self.name.replace(char::is_whitespace, "_"),
            s.nqn,
            s.transport.name(),
            s.addrs
                .iter()
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(","),
            s.port
        );
        if s.allow_any_host {
            line.push_str(" allow-any-host");
        } else {
            line.push_str(&format!(" hosts={}", s.hosts.join(",")));
        }
        for (key, secret) in [
            ("dhchap-secret", &s.dhchap_secret),
            ("dhchap-ctrl-secret", &s.dhchap_ctrl_secret),
        ] {
            if let Some(secret) = secret {
                line.push_str(&format!(" {key}={secret}"));
            }
        }
        line
    }

    fn parse(line: &str) -> Result<Self, String> {
        let mut words = line.split_whitespace();
        if words.next() != Some("EXPORT") {
            return Err("not an EXPORT line".to_owned());
        }
        let uuid = words.next().ok_or("no array UUID")?.to_owned();
        let (mut name, mut nqn, mut transport, mut addrs, mut port) =
            (None, None, None, None, None);
        let mut spec_hosts = Vec::new();
        let (mut any, mut secret, mut ctrl_secret) = (false, None, None);
        for word in words {
            let (key, value) = word.split_once('=').unwrap_or((word, ""));
            match key {
                "name" => name = Some(value.to_owned()),
                "nqn" => nqn = Some(value.to_owned()),
                "transport" => transport = clap::ValueEnum::from_str(value, false).ok(),
                "addr" => {
                    addrs = value
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<Vec<IpAddr>, _>>()
                        .ok()
                }
                "port" => port = value.parse::<u16>().ok(),
                "hosts" => {
                    spec_hosts = value
                        .split(',')
                        .filter(|h| !h.is_empty())
                        .map(str::to_owned)
                        .collect()
                }
                "allow-any-host" => any = true,
                "dhchap-secret" => secret = Some(value.to_owned()),
                "dhchap-ctrl-secret" => ctrl_secret = Some(value.to_owned()),
                _ => return Err(format!("unknown word '{word}'")),
            }
        }
        let spec = ExportSpec {
            nqn: nqn.filter(|n| valid_nqn(n)).ok_or("no valid nqn=")?,
            transport: transport.ok_or("no transport=tcp|rdma")?,
            addrs: addrs.filter(|a| !a.is_empty()).ok_or("no valid addr=")?,
            port: port.ok_or("no valid port=")?,
            hosts: spec_hosts,
            allow_any_host: any,
            dhchap_secret: secret,
            dhchap_ctrl_secret: ctrl_secret,
        };
        if spec.hosts.is_empty() != spec.allow_any_host {
            return Err("needs hosts= or allow-any-host (one of them)".to_owned());
        }
        Ok(Self {
            uuid,
            name: name.unwrap_or_default(),
            spec,
        })
    }
}

/// exports.conf's lines; the ones that do not parse are reported on stderr and left out.
pub fn load(path: &Path) -> Result<Vec<Kept>, CtlError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CtlError::io(format!("reading {}", path.display()), e)),
    };
    let mut kept = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match Kept::parse(line) {
            Ok(k) => kept.push(k),
            Err(why) => eprintln!(
                "graidctl: {} line {}: {why}; ignored",
                path.display(),
                n + 1
            ),
        }
    }
    Ok(kept)
}

/// Writes `kept` as exports.conf: a new file (mode 0600) renamed over the old one.
pub fn save(path: &Path, kept: &[Kept]) -> Result<(), CtlError> {
    let mut text = String::from(
        "# The arrays graid exports over NVMe-oF, written by graidctl export and unexport.\n\
         # Each is exported again when its array starts (graidctl export --restore).\n",
    );
    for k in kept {
        text.push_str(&k.line());
        text.push('\n');
    }
    let fail = |e| CtlError::io(format!("writing {}", path.display()), e);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(fail)?;
    }
    let tmp = path.with_extension("conf.new");
    // A leftover of a crash may have other permissions: made afresh, the file is 0600.
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    fs::rename(&tmp, path).map_err(fail)
}

/// What an export verb did, for --json.
#[derive(Serialize)]
struct Done<'a> {
    array: &'a str,
    nqn: &'a str,
    action: &'a str,
}

/// `graidctl export`.
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    args: &ExportArgs,
    json_out: bool,
) -> Result<String, CtlError> {
    precheck(args)?;
    let nvmet = Nvmet::new(NVMET_ROOT);
    let path = Path::new(EXPORTS_PATH);
    if args.restore {
        return restore(ctl, sys, &nvmet, path, args.array.as_deref(), json_out);
    }
    let array = array_ref::parse(args.array.as_deref().unwrap_or_default())?;
    let view = ArrayView::new(&resolve(ctl, sys, &array)?, sys);
    if let Some(e) = view.exports.first() {
        return Err(CtlError::Failed(format!(
            "{} is exported already, as {} (graidctl unexport it first)",
            view.device, e.nqn
        )));
    }
    let spec = spec_from(args, &view);
    load_modules(spec.transport)?;
    export_now(&nvmet, &view, &spec)?;
    let mut kept = load(path)?;
    kept.retain(|k| k.uuid != view.uuid);
    kept.push(Kept {
        uuid: view.uuid.clone(),
        name: view.name.clone(),
        spec: spec.clone(),
    });
    save(path, &kept)?;
    Ok(if json_out {
        json(&Done {
            array: &view.device,
            nqn: &spec.nqn,
            action: "exported",
        })
    } else {
        let to = if spec.allow_any_host {
            "any host".to_owned()
        } else {
            spec.hosts.join(", ")
        };
        let at: Vec<String> = spec
            .addrs
            .iter()
            .map(|a| {
                format!(
                    "{} {}",
                    spec.transport.name(),
                    SocketAddr::new(*a, spec.port)
                )
            })
            .collect();
        format!(
            "exported {} ({}) as {} over {} to {to}\n",
            view.device,
            view.name,
            spec.nqn,
            at.join(", ")
        )
    })
}

/// Checks what can be checked of `args` without the module: NQNs well formed, the hosts named
/// (or any host allowed), secrets in DH-HMAC-CHAP's form.
pub fn precheck(args: &ExportArgs) -> Result<(), CtlError> {
    if args.restore {
        return Ok(());
    }
    for n in args.nqn.iter().chain(&args.allow_hosts) {
        if !valid_nqn(n) {
            return Err(CtlError::Usage(format!(
                "'{n}' is not an NQN (nqn.YYYY-MM.reverse.domain:name, or \
                 nqn.2014-08.org.nvmexpress:uuid:UUID; at most 223 characters, no '/')"
            )));
        }
    }
    let mut addrs = args.addr.clone();
    addrs.sort();
    addrs.dedup();
    if addrs.len() != args.addr.len() {
        return Err(CtlError::Usage("an --addr is given twice".to_owned()));
    }
    if args.allow_hosts.is_empty() && !args.allow_any_host {
        return Err(CtlError::Usage(
            "name the hosts that may connect (--allow-host HOSTNQN; a host's is in \
             /etc/nvme/hostnqn), or --allow-any-host"
                .to_owned(),
        ));
    }
    let secrets = [&args.dhchap_secret, &args.dhchap_ctrl_secret];
    if secrets
        .into_iter()
        .flatten()
        .any(|s| !s.starts_with("DHHC-1:"))
    {
        return Err(CtlError::Usage(
            "a DH-HMAC-CHAP secret is DHHC-1:NN:BASE64: (nvme gen-dhchap-key makes one)".to_owned(),
        ));
    }
    Ok(())
}

/// The export `args` ask for ([`precheck`]ed) of the array `view`.
fn spec_from(args: &ExportArgs, view: &ArrayView) -> ExportSpec {
    ExportSpec {
        nqn: args.nqn.clone().unwrap_or_else(|| default_nqn(&view.uuid)),
        transport: args.transport,
        addrs: args.addr.clone(),
        port: args.port,
        hosts: args.allow_hosts.clone(),
        allow_any_host: args.allow_any_host,
        dhchap_secret: args.dhchap_secret.clone(),
        dhchap_ctrl_secret: args.dhchap_ctrl_secret.clone(),
    }
}

/// nvmet and the transport's module, loaded (nothing if they are).
fn load_modules(transport: Transport) -> Result<(), CtlError> {
    for module in ["nvmet", transport.module()] {
        let loaded = std::process::Command::new(crate::control::modprobe_path())
            .args(["-q", module])
            .status()
            .is_ok_and(|s| s.success());
        if !loaded {
            return Err(CtlError::Failed(format!(
                "cannot load {module}: this kernel has no NVMe-oF target for {} \
                 (CONFIG_NVME_TARGET, CONFIG_NVME_TARGET_{})",
                transport.name(),
                transport.name().to_uppercase()
            )));
        }
    }
    if !Path::new(NVMET_ROOT).is_dir() {
        return Err(CtlError::Failed(format!(
            "{NVMET_ROOT} is missing: is configfs mounted on /sys/kernel/config?"
        )));
    }
    Ok(())
}

fn export_now(nvmet: &Nvmet, view: &ArrayView, spec: &ExportSpec) -> Result<(), CtlError> {
    // NVMe's serial number is 20 ASCII characters at most, the model 40.
    let serial: String = view.uuid.replace('-', "").chars().take(20).collect();
    let model: String = format!("graid {}", view.name).chars().take(40).collect();
    nvmet
        .add(spec, &view.device, &view.uuid, &serial, &model)
        .map_err(|e| CtlError::Failed(format!("exporting {}: {e}", view.device)))
}

/// `export --restore`: the kept exports of running arrays not exported now.
fn restore(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    nvmet: &Nvmet,
    path: &Path,
    array: Option<&str>,
    json_out: bool,
) -> Result<String, CtlError> {
    let only = match array {
        Some(a) => Some(ArrayView::new(&resolve(ctl, sys, &array_ref::parse(a)?)?, sys).uuid),
        None => None,
    };
    let running = running_views(ctl, sys)?;
    let mut out = String::new();
    let mut failed = Vec::new();
    let mut done = Vec::new();
    let kept = load(path)?;
    for (kept, view) in to_restore(&kept, &running, only.as_deref()) {
        let result =
            load_modules(kept.spec.transport).and_then(|()| export_now(nvmet, view, &kept.spec));
        match result {
            Ok(()) => {
                out.push_str(&format!(
                    "exported {} ({}) as {}\n",
                    view.device, view.name, kept.spec.nqn
                ));
                done.push(Done {
                    array: &view.device,
                    nqn: &kept.spec.nqn,
                    action: "exported",
                });
            }
            Err(e) => failed.push(e.to_string()),
        }
    }
    let stdout = if json_out { json(&done) } else { out };
    if failed.is_empty() {
        Ok(stdout)
    } else {
        Err(CtlError::Partial {
            stdout,
            message: failed.join("; "),
        })
    }
}

/// The kept exports to make again: those of running arrays (only `only`'s, if given) that are
/// not exported now, with the array.
fn to_restore<'a>(
    kept: &'a [Kept],
    running: &'a [ArrayView],
    only: Option<&str>,
) -> Vec<(&'a Kept, &'a ArrayView)> {
    kept.iter()
        .filter(|k| only.is_none_or(|u| u == k.uuid))
        .filter_map(|k| running.iter().find(|v| v.uuid == k.uuid).map(|v| (k, v)))
        .filter(|(_, v)| v.exports.is_empty())
        .collect()
}

/// `graidctl unexport ARRAY`: takes its exports down and forgets them. An array that is not
/// running is named as exports.conf names it.
pub fn unexport(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &str,
    json_out: bool,
) -> Result<String, CtlError> {
    let nvmet = Nvmet::new(NVMET_ROOT);
    let path = Path::new(EXPORTS_PATH);
    let mut kept = load(path)?;
    let (uuid, label, exports) = match array_ref::parse(array).and_then(|a| resolve(ctl, sys, &a)) {
        Ok(d) => {
            let view = ArrayView::new(&d, sys);
            (view.uuid, view.device, view.exports)
        }
        Err(e) => match kept.iter().find(|k| k.name == array || k.uuid == array) {
            Some(k) => (k.uuid.clone(), array.to_owned(), Vec::new()),
            None => return Err(e),
        },
    };
    let was_kept = kept.iter().any(|k| k.uuid == uuid);
    if exports.is_empty() && !was_kept {
        return Err(CtlError::Failed(format!("{label} is not exported")));
    }
    take_down(&nvmet, &label, &exports)?;
    kept.retain(|k| k.uuid != uuid);
    save(path, &kept)?;
    let nqns: Vec<&str> = exports.iter().map(|e| e.nqn.as_str()).collect();
    Ok(if json_out {
        json(&Done {
            array: &label,
            nqn: &nqns.join(","),
            action: "unexported",
        })
    } else {
        format!("unexported {label}\n")
    })
}

/// Takes `exports` (an array's) down in nvmet.
pub fn take_down(nvmet: &Nvmet, label: &str, exports: &[Export]) -> Result<(), CtlError> {
    for e in exports {
        nvmet
            .remove(&e.nqn)
            .map_err(|err| CtlError::Failed(format!("unexporting {label} ({}): {err}", e.nqn)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(uuid: &str, hosts: &[&str]) -> Kept {
        Kept {
            uuid: uuid.to_owned(),
            name: "web".to_owned(),
            spec: ExportSpec {
                nqn: default_nqn(uuid),
                transport: Transport::Tcp,
                addrs: vec!["10.0.0.1".parse().unwrap()],
                port: 4420,
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                allow_any_host: hosts.is_empty(),
                dhchap_secret: None,
                dhchap_ctrl_secret: None,
            },
        }
    }

    fn args(line: &str) -> ExportArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: ExportArgs,
        }
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("export").chain(line.split_whitespace()))
            .unwrap()
            .args
    }

    #[test]
    fn precheck_wants_hosts_nqns_and_secrets_well_formed() {
        let host = "nqn.2014-08.org.nvmexpress:uuid:aaaa";
        for (line, why) in [
            ("d --addr 10.0.0.1", "name the hosts"),
            (
                "d --addr 10.0.0.1 --addr 10.0.0.1 --allow-any-host",
                "given twice",
            ),
            (
                "d --addr 10.0.0.1 --allow-host web1",
                "'web1' is not an NQN",
            ),
            (
                "d --addr 10.0.0.1 --allow-any-host --nqn nqn.x:a/b",
                "is not an NQN",
            ),
            (
                "d --addr 10.0.0.1 --allow-host nqn.x:h --dhchap-secret abc",
                "DHHC-1",
            ),
        ] {
            let err = precheck(&args(line)).unwrap_err();
            assert!(
                matches!(err, CtlError::Usage(_)) && err.to_string().contains(why),
                "{line}: {err}"
            );
        }
        precheck(&args(&format!(
            "d --addr 10.0.0.1 --allow-host {host} --dhchap-secret DHHC-1:00:x:"
        )))
        .unwrap();
        precheck(&args("d --addr fd00::1 --allow-any-host --transport rdma")).unwrap();
        precheck(&args("--restore")).unwrap();
    }

    #[test]
    fn restore_takes_the_running_arrays_not_exported_now() {
        use crate::control::fake::array;
        use crate::member::fake::FakeSystem;
        let sys = FakeSystem::default();
        // graid0 is exported now; graid1 is not; the third kept array is not running.
        sys.exports.borrow_mut().push(Export {
            nqn: "nqn.x:zero".into(),
            device: "/dev/graid0".into(),
            enabled: true,
            listeners: Vec::new(),
            hosts: Vec::new(),
            allow_any_host: true,
        });
        let running: Vec<ArrayView> = [array(0, "zero", 5, &[]), array(1, "one", 5, &[])]
            .iter()
            .map(|d| ArrayView::new(d, &sys))
            .collect();
        let kept: Vec<Kept> = [&running[0].uuid, &running[1].uuid, "not-running"]
            .iter()
            .map(|u| kept(u, &[]))
            .collect();
        let devices = |only| -> Vec<String> {
            to_restore(&kept, &running, only)
                .iter()
                .map(|(_, v)| v.device.clone())
                .collect()
        };
        assert_eq!(devices(None), ["/dev/graid1"]);
        assert_eq!(devices(Some(running[1].uuid.as_str())), ["/dev/graid1"]);
        assert!(devices(Some(running[0].uuid.as_str())).is_empty());
    }

    #[test]
    fn lines_round_trip() {
        let mut k = kept(
            "01234567-89ab-cdef-0123-456789abcdef",
            &["nqn.2014-08.org.nvmexpress:uuid:a", "nqn.x:b"],
        );
        k.spec.dhchap_secret = Some("DHHC-1:00:abc:".into());
        k.spec.addrs = vec!["fd00::1".parse().unwrap(), "10.0.0.2".parse().unwrap()];
        assert_eq!(Kept::parse(&k.line()), Ok(k.clone()));
        let any = kept("u", &[]);
        assert!(any.line().contains("allow-any-host"));
        assert_eq!(Kept::parse(&any.line()), Ok(any));
    }

    #[test]
    fn bad_lines_say_why() {
        for (line, why) in [
            ("ARRAY web", "not an EXPORT"),
            (
                "EXPORT u nqn=nqn.x:a transport=fc addr=1.2.3.4 port=1 allow-any-host",
                "transport",
            ),
            (
                "EXPORT u nqn=nqn.x:a transport=tcp addr=host port=1 allow-any-host",
                "addr",
            ),
            (
                "EXPORT u nqn=bad transport=tcp addr=1.2.3.4 port=1 allow-any-host",
                "nqn",
            ),
            (
                "EXPORT u nqn=nqn.x:a transport=tcp addr=1.2.3.4 port=1",
                "hosts= or allow-any-host",
            ),
            (
                "EXPORT u nqn=nqn.x:a transport=tcp addr=1.2.3.4 port=1 hosts=h allow-any-host",
                "one of",
            ),
            (
                "EXPORT u nqn=nqn.x:a transport=tcp addr=1.2.3.4 port=99999 allow-any-host",
                "port",
            ),
            (
                "EXPORT u nqn=nqn.x:a transport=tcp addr=1.2.3.4 port=1 allow-any-host bogus=1",
                "unknown",
            ),
        ] {
            let err = Kept::parse(line).unwrap_err();
            assert!(err.contains(why), "{line}: {err}");
        }
    }

    #[test]
    fn the_file_is_written_whole_and_private() {
        let dir = std::env::temp_dir().join(format!("graidctl-exports-{}", std::process::id()));
        let path = dir.join("exports.conf");
        let all = vec![kept("a", &["nqn.x:h"]), kept("b", &[])];
        save(&path, &all).unwrap();
        assert_eq!(load(&path).unwrap(), all);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::write(
            &path,
            "# c\n\nEXPORT broken\n".to_owned() + &all[1].line() + "\n",
        )
        .unwrap();
        assert_eq!(load(&path).unwrap(), [all[1].clone()]);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(load(&path).unwrap(), []);
    }
}
