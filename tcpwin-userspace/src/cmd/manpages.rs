//! `tcpwin-trace manpages DIR` (hidden): the man pages, rendered by `clap_mangen` from the same
//! definitions `--help` prints, so the two never drift apart.
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use super::Cli;

/// Writes `tcpwin-trace.1` and `tcpwin-trace-COMMAND.1` for every visible command.
pub fn write(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cmd = Cli::command();
    let mut pages = vec![("tcpwin-trace".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        // clap names take &'static str (without its `string` feature): a one-shot command
        let name: &'static str =
            Box::leak(format!("tcpwin-trace-{}", sub.get_name()).into_boxed_str());
        pages.push((name.to_string(), sub.clone().name(name).bin_name(name)));
    }
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(page)
            .render(&mut out)
            .with_context(|| format!("rendering {name}.1"))?;
        std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
