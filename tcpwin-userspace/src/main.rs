use clap::Parser;
use tcpwin_userspace::{
    cli::{Cli, Cmd},
    cmd,
};

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Some(Cmd::Transfer(t)) => tcpwin_lab::endpoints::run(t),
        Some(Cmd::Demo) => cmd::demo::run(),
        Some(Cmd::Lab(a)) => cmd::lab::run(cmd::lab::LabOpts {
            full: a.full,
            json: a.json,
            bytes: a.bytes,
        }),
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(cmd::trace::run(cli.trace))),
    };
    if let Err(e) = result {
        eprintln!("tcpwin-trace: error: {e:#}");
        std::process::exit(1);
    }
}
