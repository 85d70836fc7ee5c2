//! Which host an array belongs to (mdadm's homehost): `create` records this host in the
//! superblocks, and boot-time assembly (`assemble --incremental`, `assemble --scan`) starts by
//! itself only arrays of this host or of none, so drives moved in from another machine are not
//! started behind its owner's back.
//!
//! This host is `HOMEHOST` in `/etc/graid/graid.conf` when set, else the system's host name.

use crate::error::CtlError;
use graid_engine::superblock::{HomeHost, HOMEHOST_LEN};

pub use crate::config::CONFIG_PATH;

/// What `HOMEHOST` says (mdadm.conf's keyword and special values).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Setting {
    /// `<system>` (the default): the system's host name.
    #[default]
    System,
    /// This name.
    Name(String),
    /// `<ignore>`: every array is taken as this host's at assembly; new arrays record the
    /// system's host name.
    Ignore,
}

/// This host's identity and how strictly assembly matches it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// What new arrays record; `None`: no usable identity (an unset or placeholder host name).
    pub host: Option<String>,
    /// Every array counts as this host's (`HOMEHOST <ignore>`).
    pub ignore: bool,
    /// Arrays graid.conf's ARRAY lines name: this host's whatever their superblocks say.
    pub listed: Vec<[u8; 16]>,
    /// `AUTO -all`: only those start by themselves.
    pub only_listed: bool,
}

/// Host names every unconfigured machine has: recording one would make every such machine
/// take the array for its own.
const PLACEHOLDERS: [&str; 4] = ["", "(none)", "localhost", "localhost.localdomain"];

/// Checks a host name as the superblock field will.
pub fn check_name(name: &str) -> Result<String, String> {
    if name.chars().any(char::is_whitespace) {
        return Err("contains white space".to_owned());
    }
    HomeHost::new(name)
        .map(|_| name.to_owned())
        .map_err(|e| e.to_string())
}

/// The policy for `setting` on a system named `hostname`.
pub fn policy(setting: &Setting, hostname: &str) -> Policy {
    let system = hostname.trim();
    let system =
        (!PLACEHOLDERS.contains(&system) && check_name(system).is_ok()).then(|| system.to_owned());
    match setting {
        Setting::System => Policy {
            host: system,
            ..Policy::default()
        },
        Setting::Name(name) => Policy {
            host: Some(name.clone()),
            ..Policy::default()
        },
        Setting::Ignore => Policy {
            host: system,
            ignore: true,
            ..Policy::default()
        },
    }
}

/// This machine's policy: graid.conf (a missing file is the default) and the kernel's host name.
/// Warnings about the file go to standard error.
pub fn load() -> Result<Policy, CtlError> {
    let config = crate::config::load()?;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    Ok(Policy {
        listed: config.arrays.iter().map(|a| a.uuid).collect(),
        only_listed: config.only_listed,
        ..policy(&config.homehost, &hostname)
    })
}

impl Policy {
    /// Every array counts as this host's (`--any-host`, or where no policy applies).
    pub fn any_host() -> Self {
        Self {
            ignore: true,
            ..Self::default()
        }
    }

    /// Why scanning assembly leaves the array `uuid` of `homehost` alone, if it does: another
    /// host's, or not listed under `AUTO -all`. An array of an ARRAY line always starts.
    pub fn refuses(&self, uuid: &[u8; 16], homehost: &HomeHost) -> Option<String> {
        if self.ignore || self.listed.contains(uuid) {
            None
        } else if self.only_listed {
            Some(format!("is not listed in {CONFIG_PATH} (AUTO -all)"))
        } else if !self.owns(homehost) {
            Some(self.foreign_reason(homehost))
        } else {
            None
        }
    }

    /// Whether assembly may start an array recording `homehost` by itself.
    pub fn owns(&self, homehost: &HomeHost) -> bool {
        self.ignore || homehost.is_empty() || self.host.as_deref() == Some(homehost.as_str())
    }

    /// Why an array of `homehost` is left alone, for messages.
    pub fn foreign_reason(&self, homehost: &HomeHost) -> String {
        match &self.host {
            Some(host) => format!("belongs to host '{}' (this is '{host}')", homehost.as_str()),
            None => format!(
                "belongs to host '{}' (this host has no name: set HOMEHOST in {CONFIG_PATH})",
                homehost.as_str()
            ),
        }
    }
}

/// What `create` records when `--homehost` is not given: this host, or none.
pub fn default_for_create(policy: &Policy) -> String {
    policy.host.clone().unwrap_or_else(|| NONE.to_owned())
}

/// `create --homehost`'s value for "no host".
pub const NONE: &str = "<none>";

/// The on-disk field for `create --homehost` (already checked by [`parse_arg`]).
pub fn field(chosen: Option<&str>) -> [u8; HOMEHOST_LEN] {
    let host = chosen.filter(|&h| h != NONE).unwrap_or("");
    HomeHost::new(host).map_or([0; HOMEHOST_LEN], |h| *h.as_padded())
}

/// Parses `create --homehost`: a host name, or `<none>`.
pub fn parse_arg(text: &str) -> Result<String, String> {
    if text == NONE {
        return Ok(text.to_owned());
    }
    if text.is_empty() {
        return Err(format!("the host must not be empty ({NONE} records none)"));
    }
    check_name(text).map_err(|e| format!("the host '{text}' {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_config(text: &str) -> Result<(Setting, Vec<String>), String> {
        crate::config::parse(text).map(|(c, w)| (c.homehost, w))
    }

    fn host(name: &str) -> HomeHost {
        HomeHost::new(name).unwrap()
    }

    #[test]
    fn the_config_file_sets_the_host() {
        assert_eq!(parse_config("").unwrap(), (Setting::System, vec![]));
        let text = "# graid\n\n  homehost   node-7   # the rack's name\n";
        assert_eq!(
            parse_config(text).unwrap().0,
            Setting::Name("node-7".to_owned())
        );
        assert_eq!(
            parse_config("HOMEHOST <ignore>").unwrap().0,
            Setting::Ignore
        );
        assert_eq!(
            parse_config("HOMEHOST a\nHOMEHOST <system>").unwrap().0,
            Setting::System
        );
    }

    #[test]
    fn the_config_file_refuses_bad_hosts_and_warns_of_unknown_keywords() {
        let (setting, warnings) = parse_config("MAILADDR root\nHOMEHOST x").unwrap();
        assert_eq!(setting, Setting::Name("x".to_owned()));
        assert_eq!(
            warnings,
            ["/etc/graid/graid.conf line 1: unknown keyword 'MAILADDR', ignored"]
        );
        assert_eq!(
            parse_config("\nHOMEHOST").unwrap_err(),
            "/etc/graid/graid.conf line 2: HOMEHOST needs a value"
        );
        let err = parse_config("HOMEHOST a/b").unwrap_err();
        assert!(err.contains("line 1: HOMEHOST 'a/b' contains '/'"), "{err}");
        assert!(parse_config("HOMEHOST two words").is_err());
        assert!(parse_config(&format!("HOMEHOST {}", "h".repeat(65))).is_err());
    }

    #[test]
    fn placeholder_host_names_are_no_identity() {
        for name in ["", "(none)\n", "localhost", "localhost.localdomain"] {
            assert_eq!(policy(&Setting::System, name).host, None, "{name:?}");
        }
        assert_eq!(
            policy(&Setting::System, "node-1\n").host.as_deref(),
            Some("node-1")
        );
        // A configured name wins over the system's.
        let named = policy(&Setting::Name("rack-a".to_owned()), "node-1");
        assert_eq!(named.host.as_deref(), Some("rack-a"));
    }

    #[test]
    fn arrays_of_this_host_or_none_are_owned() {
        let p = policy(&Setting::System, "node-1");
        assert!(p.owns(&HomeHost::EMPTY));
        assert!(p.owns(&host("node-1")));
        assert!(!p.owns(&host("node-2")));
        assert_eq!(
            p.foreign_reason(&host("node-2")),
            "belongs to host 'node-2' (this is 'node-1')"
        );
        // No identity: only arrays of no host.
        let nameless = policy(&Setting::System, "localhost");
        assert!(nameless.owns(&HomeHost::EMPTY) && !nameless.owns(&host("node-1")));
        assert!(nameless.foreign_reason(&host("n")).contains("set HOMEHOST"));
        // <ignore>: every array.
        assert!(policy(&Setting::Ignore, "node-1").owns(&host("node-2")));
    }

    #[test]
    fn listed_arrays_start_and_auto_minus_all_starts_only_them() {
        let mut p = policy(&Setting::System, "node-1");
        let listed = [7u8; 16];
        p.listed = vec![listed];
        assert_eq!(p.refuses(&[1; 16], &host("node-1")), None);
        // Listed: another host's array is this one's by the admin's word.
        assert_eq!(p.refuses(&listed, &host("node-2")), None);
        assert!(p.refuses(&[1; 16], &host("node-2")).is_some());
        p.only_listed = true;
        assert_eq!(
            p.refuses(&[1; 16], &host("node-1")).unwrap(),
            "is not listed in /etc/graid/graid.conf (AUTO -all)"
        );
        assert_eq!(p.refuses(&listed, &HomeHost::EMPTY), None);
        assert_eq!(Policy::any_host().refuses(&[1; 16], &host("x")), None);
    }

    #[test]
    fn create_records_the_chosen_host_or_this_one() {
        let text = |f: [u8; HOMEHOST_LEN]| HomeHost::from_padded(f).unwrap().as_str().to_owned();
        assert_eq!(text(field(Some("other"))), "other");
        assert_eq!(text(field(Some("<none>"))), "");
        assert_eq!(text(field(None)), "");
        let p = policy(&Setting::System, "node-1");
        assert_eq!(default_for_create(&p), "node-1");
        assert_eq!(
            default_for_create(&policy(&Setting::System, "(none)")),
            "<none>"
        );
        assert_eq!(parse_arg("<none>").unwrap(), "<none>");
        assert_eq!(parse_arg("n1").unwrap(), "n1");
        assert!(parse_arg("").is_err() && parse_arg("a/b").is_err());
    }
}
