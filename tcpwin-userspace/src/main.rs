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
        Some(Cmd::Ss(a)) => cmd::ss::run(a),
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
        // `tcpwin-trace ss | head`: the reader left, nothing is wrong
        if e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        }) {
            return;
        }
        eprintln!("tcpwin-trace: error: {e:#}");
        std::process::exit(1);
    }
}
