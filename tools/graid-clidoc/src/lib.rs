//! Man pages and shell completions for graid's commands, generated from the same clap
//! definitions that parse their arguments, so the documents cannot drift from the code.
//! Each binary has a hidden `generate-docs DIR` subcommand that calls [`write`]; packaging
//! (`make deb`) runs it.

use clap::Command;
use clap_complete::Shell;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Man section 8: system administration commands.
const SECTION: &str = "8";

/// Writes into `dir`: `NAME.8` for the command and `NAME-SUB.8` for each visible subcommand,
/// and completions for bash (`NAME`), zsh (`_NAME`) and fish (`NAME.fish`).
pub fn write(cmd: Command, dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let name = cmd.get_name().to_string();
    // After build() a subcommand's display name is NAME-SUB, its page's name.
    write_page(&cmd, dir)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_page(sub, dir)?;
    }
    for (shell, file) in [
        (Shell::Bash, name.clone()),
        (Shell::Zsh, format!("_{name}")),
        (Shell::Fish, format!("{name}.fish")),
    ] {
        let mut out = File::create(dir.join(file))?;
        clap_complete::generate(shell, &mut cmd, &name, &mut out);
        out.flush()?;
    }
    Ok(())
}

fn write_page(cmd: &Command, dir: &Path) -> io::Result<()> {
    clap_mangen::Man::new(cmd.clone())
        .section(SECTION)
        .manual("graid")
        .source(format!("graid {}", env!("CARGO_PKG_VERSION")))
        .generate_to(dir)
        .map(|_| ())
}
