//! `tcpwin-trace cache [--clear]`: the socket iterator kept pinned between commands (see
//! `kernel::cache`), shown or removed.
use anyhow::Result;

use crate::kernel::cache;

#[derive(clap::Args, Debug)]
pub struct CacheArgs {
    /// Remove every entry (the pinned iterators and their layout files); the next command
    /// loads the iterator afresh
    #[arg(long)]
    pub clear: bool,
}

pub fn run(args: CacheArgs) -> Result<()> {
    crate::kernel::object::check_privileges()?;
    if args.clear {
        let removed = cache::clear()?;
        if removed.is_empty() {
            println!("nothing to remove");
        }
        for p in removed {
            println!("removed {}", p.display());
        }
        return Ok(());
    }
    let lines = cache::status();
    if lines.is_empty() {
        println!(
            "no entry: the next `ss`, `check` or `top` loads the socket iterator and pins it ({} is {})",
            cache::ENV,
            std::env::var(cache::ENV).unwrap_or_else(|_| "unset".into())
        );
    }
    for l in lines {
        println!("{l}");
    }
    Ok(())
}
