//! The binary nodes run needs no more than the README says it does
//! ("Does it fit your cluster?": static-pie, no library on the node, a
//! Linux kernel of the version it names or newer): read from the built
//! `node-bootstrap-static` (`scripts/build-static.sh`) with binutils'
//! `readelf`, as an operator would check a binary before hosting it.

use std::process::Command;

fn readelf(args: &[&str], bin: &std::path::Path) -> String {
    let out = Command::new("readelf")
        .args(args)
        .arg(bin)
        .output()
        .expect("running readelf");
    assert!(out.status.success(), "readelf {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The kernel the README says the binary needs ("a Linux kernel 3.2 or
/// newer" in the fit table's binary row), as (major, minor).
fn readme_kernel_floor() -> (u32, u32) {
    let readme = std::fs::read_to_string(testkit::project_root().join("README.md")).unwrap();
    let row = readme
        .lines()
        .find(|l| l.starts_with("| binary |"))
        .expect("README's fit table has a binary row");
    let at = row
        .find("Linux kernel ")
        .expect("the binary row names the kernel it needs");
    let v: String = row[at + "Linux kernel ".len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let (a, b) = v
        .trim_end_matches('.')
        .split_once('.')
        .expect("major.minor");
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn the_static_binary_needs_no_library_and_no_newer_kernel_than_the_readme_says() {
    if testkit::skip_without(&["readelf"]) {
        return;
    }
    let Some(bin) = testkit::cli::static_agent_binary() else {
        testkit::skip_because("no node-bootstrap-static: run scripts/build-static.sh");
        return;
    };
    // No dynamic loader (a dynamically linked binary names one in
    // PT_INTERP), no shared library: nothing to find on the node.
    let headers = readelf(&["-lW"], &bin);
    assert!(
        !headers.contains("INTERP"),
        "{} asks for a dynamic loader:\n{headers}",
        bin.display()
    );
    let dynamic = readelf(&["-dW"], &bin);
    let needed: Vec<&str> = dynamic.lines().filter(|l| l.contains("(NEEDED)")).collect();
    assert!(
        needed.is_empty(),
        "{} needs shared libraries the README does not name: {needed:?}",
        bin.display()
    );
    // Position independent (static-pie: the kernel may load it anywhere).
    let header = readelf(&["-hW"], &bin);
    assert!(
        header.contains("DYN (Position-Independent Executable file)")
            || header.contains("DYN (Shared object file)"),
        "{}",
        header
    );
    // The kernel glibc was built for (its ABI note): no newer than the
    // README's floor.
    let notes = readelf(&["-nW"], &bin);
    let abi = notes
        .lines()
        .find_map(|l| l.split_once("OS: Linux, ABI: ").map(|(_, v)| v))
        .unwrap_or_else(|| panic!("no NT_GNU_ABI_TAG note in {}:\n{notes}", bin.display()));
    let mut parts = abi.trim().split('.').map(|p| p.parse::<u32>().unwrap());
    let needs = (parts.next().unwrap(), parts.next().unwrap());
    let says = readme_kernel_floor();
    assert!(
        needs <= says,
        "{} needs Linux {}.{}, the README says {}.{}",
        bin.display(),
        needs.0,
        needs.1,
        says.0,
        says.1
    );
    // And it runs (here, on Debian's kernel).
    let out = Command::new(&bin)
        .args(["version", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", testkit::cli::stderr(&out));
}
