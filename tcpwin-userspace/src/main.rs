//! The binary `tcpwin-trace`: parse the command line, run the command, say its error in one line
//! (a reader that left, `| head`, is not one).
use clap::Parser;
use tcpwin_userspace::{
    cmd::{self, Cli, Cmd},
    kernel,
};

/// `tcpwin-trace ss | head`: the reader left, nothing is wrong.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() {
    let cli = Cli::parse();
    // before anything is loaded: the kernel side's log level is written into its .rodata
    kernel::log::configure(match &cli.cmd {
        Some(c) => c
            .kernel()
            .map_or(kernel::log::LogLevel::Off, |k| k.log_level()),
        None => cli.trace.kernel.log_level(),
    });
    let result = match cli.cmd {
        Some(Cmd::Transfer { args }) => cmd::lab::endpoints(args),
        Some(Cmd::Demo) => cmd::demo::run(),
        Some(Cmd::Ss(a)) => cmd::ss::run(a),
        Some(Cmd::Exporter(a)) => cmd::exporter::run(a),
        Some(Cmd::Check(a)) => match cmd::check::run(a) {
            Ok(code) => std::process::exit(code),
            Err(e) if broken_pipe(&e) => return,
            // a health check tells "does not fit" (1) from "could not tell" (2)
            Err(e) => {
                eprintln!("tcpwin-trace: error: {e:#}");
                std::process::exit(cmd::check::exit::ERROR);
            }
        },
        Some(Cmd::Lab(a)) => cmd::lab::run(a),
        Some(Cmd::Manpages { dir }) => cmd::manpages::write(&dir),
        Some(Cmd::Report(a)) => cmd::report::run(a),
        Some(Cmd::Cache(a)) => cmd::cache::run(a),
        Some(Cmd::Top(a)) => cmd::top::run(a),
        Some(Cmd::Record(a)) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(cmd::trace::record(a.trace, &a.output))),
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(cmd::trace::run(cli.trace))),
    };
    if let Err(e) = result {
        if broken_pipe(&e) {
            return;
        }
        eprintln!("tcpwin-trace: error: {e:#}");
        std::process::exit(1);
    }
}
