//! `vetto doctor`: what this host can enforce.

use std::process::ExitCode;

use super::DoctorArgs;
use crate::host;

pub fn doctor(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let caps = host::probe();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&caps)?);
    } else {
        println!("{caps:#?}");
    }
    Ok(ExitCode::SUCCESS)
}
