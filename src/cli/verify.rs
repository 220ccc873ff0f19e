//! `vetto verify`: run the built-in attack probes inside the sandbox on
//! this host and show what is contained (see `crate::verify`).

use std::process::ExitCode;

use anyhow::Context;

use super::VerifyArgs;
use crate::exit;
use crate::verify::{self, Options, Outcome, render};

pub fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let options = Options {
        tier: args.tier,
        net_host: args.net.as_deref() == Some("host"),
        allow_degraded: args.allow_degraded,
    };
    let report = match verify::run(&options)? {
        Outcome::Ran(r) => r,
        Outcome::Refused(refusal) => {
            eprintln!("vetto: {refusal}");
            if args.json {
                let doc = serde_json::json!({
                    "schema": verify::SCHEMA,
                    "passed": false,
                    "refused": refusal,
                });
                println!("{doc:#}");
            }
            return Ok(ExitCode::from(exit::REFUSED));
        }
    };
    if args.json {
        println!(
            "{}",
            render::json(&report).context("cannot render the report")?
        );
    } else {
        print!("{}", render::text(&report));
    }
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
