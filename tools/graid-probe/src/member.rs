//! MEMBER on a running array without graidctl's own checks, so a test sees the module's
//! answer to what graidctl would refuse first (removing an active member, say): prints the
//! errno's name, or `OK`.

use crate::create::member_of;
use crate::sys::{errno_name, open_control, raw_ioctl};
use graid_abi::{
    GraidMemberOp, GRAID_IOC_MEMBER, GRAID_MEMBER_OP_ADD, GRAID_MEMBER_OP_FAIL,
    GRAID_MEMBER_OP_REMOVE,
};
use std::process::ExitCode;

/// `graid-probe member INDEX fail|remove|add DEVICE`.
pub fn run(control: &str, args: &[String]) -> ExitCode {
    let [index, op, device] = args else {
        eprintln!("usage: graid-probe member INDEX fail|remove|add DEVICE");
        return ExitCode::from(2);
    };
    let (Ok(index), Some(op)) = (
        index.parse::<u32>(),
        match op.as_str() {
            "fail" => Some(GRAID_MEMBER_OP_FAIL),
            "remove" => Some(GRAID_MEMBER_OP_REMOVE),
            "add" => Some(GRAID_MEMBER_OP_ADD),
            _ => None,
        },
    ) else {
        eprintln!("usage: graid-probe member INDEX fail|remove|add DEVICE");
        return ExitCode::from(2);
    };
    let dev = match member_of(device) {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let fd = match open_control(control) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("open {control}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut req = GraidMemberOp {
        index,
        op,
        dev,
        ..Default::default()
    };
    match raw_ioctl(&fd, GRAID_IOC_MEMBER, &mut req as *mut _ as usize) {
        0 => println!("OK role {}", req.role),
        errno => println!("{}", errno_name(errno)),
    }
    ExitCode::SUCCESS
}
