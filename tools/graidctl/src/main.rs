//! graidctl: manage graid arrays (the mdadm of graid).

mod control;
mod error;
mod version;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

const EXIT_CODES_HELP: &str = "\
Exit status:
  0  success
  1  failure (the message names the device and the reason)
  2  usage error
  3  the raid_gpu module is not loaded
  4  the loaded module speaks another ABI version than this graidctl
  5  permission denied (graid's control device needs root)";

#[derive(Parser, Debug)]
#[command(
    name = "graidctl",
    version,
    about = "Manage graid GPU-accelerated software RAID arrays"
)]
#[command(after_help = EXIT_CODES_HELP)]
struct Cli {
    /// Print machine-readable JSON instead of human-readable text.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print graidctl's and the loaded raid_gpu module's versions and ABI versions.
    Version,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are "errors" printed to stdout that exit 0.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { error::EXIT_USAGE } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Version => version::run(cli.json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("graidctl: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn json_flag_is_global() {
        let cli = Cli::try_parse_from(["graidctl", "version", "--json"]).unwrap();
        assert!(cli.json);
        let cli = Cli::try_parse_from(["graidctl", "--json", "version"]).unwrap();
        assert!(cli.json);
    }

    #[test]
    fn unknown_command_is_a_usage_error() {
        let err = Cli::try_parse_from(["graidctl", "frobnicate"]).unwrap_err();
        assert_eq!(err.exit_code(), error::EXIT_USAGE as i32);
    }
}
