//! `/etc/graid/graid.conf`, graid's mdadm.conf: `KEYWORD value...` lines, `#` comments,
//! keywords case-insensitive as in mdadm.conf. Unknown keywords are warnings, so a newer
//! graid's file stays readable.
//!
//! ```text
//! HOMEHOST <system> | <ignore> | NAME     which host this is (homehost.rs)
//! ARRAY /dev/graid/NAME UUID=U [check=no] an array of this host; check=no leaves it out of
//!                                         the scheduled checks (graid-check.timer)
//! AUTO +all | -all                        --scan and boot assembly start arrays not listed
//!                                         in ARRAY lines (+all, the default) or only those
//! PROGRAM /path                           the monitor's program when --program is not given
//! ```
//! `graidctl detail --scan` prints the ARRAY lines of the running arrays.

use crate::error::CtlError;
use crate::homehost::{check_name, Setting};
use crate::uuid;
use std::path::PathBuf;

/// graidctl's configuration file.
pub const CONFIG_PATH: &str = "/etc/graid/graid.conf";

/// What the file says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub homehost: Setting,
    pub arrays: Vec<ArrayLine>,
    /// `AUTO -all`: assembly by scanning starts only the arrays of ARRAY lines.
    pub only_listed: bool,
    pub program: Option<PathBuf>,
}

/// An `ARRAY` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayLine {
    /// The name the line gives (`/dev/graid/NAME` or `NAME`), for messages.
    pub name: String,
    pub uuid: [u8; 16],
    /// Scheduled checks include it (`check=no` leaves it out).
    pub check: bool,
}

impl Config {
    /// The ARRAY line of the array with `uuid`, if any.
    pub fn array(&self, uuid: &[u8; 16]) -> Option<&ArrayLine> {
        self.arrays.iter().find(|a| &a.uuid == uuid)
    }
}

/// Parses the file's text: the configuration and warnings, or the first error.
pub fn parse(text: &str) -> Result<(Config, Vec<String>), String> {
    let mut config = Config::default();
    let mut warnings = Vec::new();
    for (number, line) in (1..).zip(text.lines()) {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(keyword) = words.next() else {
            continue;
        };
        let value = line[keyword.len()..].trim();
        let at = |what: String| format!("{CONFIG_PATH} line {number}: {what}");
        match keyword.to_ascii_uppercase().as_str() {
            "HOMEHOST" => {
                config.homehost = match value {
                    "<system>" => Setting::System,
                    "<ignore>" => Setting::Ignore,
                    "" => return Err(at("HOMEHOST needs a value".into())),
                    name => Setting::Name(
                        check_name(name).map_err(|e| at(format!("HOMEHOST '{name}' {e}")))?,
                    ),
                }
            }
            "ARRAY" => config.arrays.push(parse_array(value).map_err(at)?),
            "AUTO" => {
                config.only_listed = match value {
                    "+all" => false,
                    "-all" => true,
                    other => return Err(at(format!("AUTO takes +all or -all, not '{other}'"))),
                }
            }
            "PROGRAM" => {
                if value.is_empty() {
                    return Err(at("PROGRAM needs a path".into()));
                }
                config.program = Some(PathBuf::from(value));
            }
            _ => warnings.push(at(format!("unknown keyword '{keyword}', ignored"))),
        }
    }
    Ok((config, warnings))
}

/// `/dev/graid/NAME UUID=U [check=yes|no] [other=...]` (other keys, such as the `level=` and
/// `members=` that `detail --scan` prints, are for people).
fn parse_array(value: &str) -> Result<ArrayLine, String> {
    let mut words = value.split_whitespace();
    let name = words
        .next()
        .filter(|w| !w.contains('='))
        .ok_or("ARRAY needs the array's name first (/dev/graid/NAME or NAME)")?;
    let mut line = ArrayLine {
        name: name.trim_start_matches("/dev/graid/").to_owned(),
        uuid: [0; 16],
        check: true,
    };
    let mut has_uuid = false;
    for word in words {
        let (key, val) = word
            .split_once('=')
            .ok_or_else(|| format!("ARRAY {name}: '{word}' is not KEY=VALUE"))?;
        match key.to_ascii_lowercase().as_str() {
            "uuid" => {
                line.uuid = uuid::parse(val).map_err(|e| format!("ARRAY {name}: {e}"))?;
                has_uuid = true;
            }
            "check" => {
                line.check = match val {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(format!("ARRAY {name}: check takes yes or no, not '{val}'")),
                }
            }
            _ => {}
        }
    }
    if !has_uuid {
        return Err(format!(
            "ARRAY {name} needs UUID= (graidctl detail --scan prints it)"
        ));
    }
    Ok(line)
}

/// The machine's configuration: a missing file is the default. Warnings go to standard error.
pub fn load() -> Result<Config, CtlError> {
    match std::fs::read_to_string(CONFIG_PATH) {
        Ok(text) => {
            let (config, warnings) = parse(&text).map_err(CtlError::Failed)?;
            for w in warnings {
                eprintln!("graidctl: {w}");
            }
            Ok(config)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
        Err(e) => Err(CtlError::io(format!("reading {CONFIG_PATH}"), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "01234567-89ab-cdef-0123-456789abcdef";

    #[test]
    fn every_keyword_is_read() {
        let text = format!(
            "# graid\nHOMEHOST node-7\nARRAY /dev/graid/data UUID={U} level=raid5 members=4\n\
             array scratch uuid={U} check=no\nAUTO -all\nPROGRAM /usr/local/sbin/alert\n"
        );
        let (c, warnings) = parse(&text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(c.homehost, Setting::Name("node-7".into()));
        assert_eq!(c.arrays.len(), 2);
        assert_eq!(c.arrays[0].name, "data");
        assert!(c.arrays[0].check && !c.arrays[1].check);
        assert_eq!(uuid::format(&c.arrays[1].uuid), U);
        assert!(c.only_listed);
        assert_eq!(
            c.program.as_deref(),
            Some(std::path::Path::new("/usr/local/sbin/alert"))
        );
        assert_eq!(c.array(&c.arrays[0].uuid).unwrap().name, "data");
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        let err = |t: &str| parse(t).unwrap_err();
        assert_eq!(
            err("\nARRAY data"),
            "/etc/graid/graid.conf line 2: ARRAY data needs UUID= (graidctl detail --scan \
             prints it)"
        );
        assert!(err("ARRAY UUID=x").contains("needs the array's name first"));
        assert!(err("ARRAY d UUID=nothex").contains("ARRAY d: "));
        assert!(err(&format!("ARRAY d UUID={U} check=maybe")).contains("yes or no"));
        assert!(err("AUTO some").contains("+all or -all"));
        assert!(err("PROGRAM").contains("needs a path"));
        let (_, warnings) = parse("MAILADDR root").unwrap();
        assert_eq!(
            warnings,
            ["/etc/graid/graid.conf line 1: unknown keyword 'MAILADDR', ignored"]
        );
    }
}
