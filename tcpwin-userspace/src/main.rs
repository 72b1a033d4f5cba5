use clap::Parser;
use tcpwin_userspace::{
    cli::{Cli, Cmd},
    demo, session, transfer,
};

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Some(Cmd::Transfer(t)) => transfer::run(t),
        Some(Cmd::Demo) => demo::run(),
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(session::run(cli.trace))),
    };
    if let Err(e) = result {
        eprintln!("tcpwin-trace: error: {e:#}");
        std::process::exit(1);
    }
}
