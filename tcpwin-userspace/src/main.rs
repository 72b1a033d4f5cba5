use clap::Parser;
use tcpwin_userspace::{
    bench,
    cli::{Cli, Cmd},
    demo, lab, session, transfer,
};

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Some(Cmd::Transfer(t)) => transfer::run(t),
        Some(Cmd::Demo) => demo::run(),
        Some(Cmd::Bench(a)) => bench::run(a),
        Some(Cmd::Lab(a)) => lab::experiment::run(lab::experiment::LabOpts {
            full: a.full,
            json: a.json,
            bytes: a.bytes,
        }),
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
