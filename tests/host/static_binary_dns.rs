//! The static binary resolves host names without glibc's NSS: run in a
//! chroot that holds nothing but it, `/etc/hosts`, `/etc/resolv.conf`, an
//! `nsswitch.conf` naming a module the root does not have (so glibc's own
//! `getaddrinfo` resolves nothing there), the CA bundle and the random
//! devices (no dynamic loader, no library, no NSS module), it reaches a
//! mirror by a name from `/etc/hosts` and by a name a DNS server of
//! `/etc/resolv.conf` answers, and names a name that resolves nowhere.
//! What a Flatcar node gives it is more than this root; the point is what
//! it does not need.

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use testkit::cli::{code, stderr, stdout};

/// The name server's address: an address of the loopback network of its
/// own, so its port 53 is free.
const NAME_SERVER: &str = "127.77.0.53";

/// A name server that answers `A` queries for `name` with 127.0.0.1 and
/// everything else with NXDOMAIN (an `AAAA` query for `name`: no answer);
/// answers until `stop`.
fn name_server(name: &'static str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let sock = UdpSocket::bind((NAME_SERVER, 53)).expect("binding the test name server");
    sock.set_read_timeout(Some(std::time::Duration::from_millis(100)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            if let Some(reply) = answer(&buf[..n], name) {
                let _ = sock.send_to(&reply, from);
            }
        }
    })
}

/// The reply to one query (RFC 1035 §4.1): the question echoed, one `A`
/// record when it asks for `name`'s `A`.
fn answer(q: &[u8], name: &str) -> Option<Vec<u8>> {
    // The question's name: labels from byte 12 up to the zero length.
    let mut i = 12;
    let mut labels = Vec::new();
    while *q.get(i)? != 0 {
        let len = q[i] as usize;
        labels.push(String::from_utf8_lossy(q.get(i + 1..i + 1 + len)?).to_lowercase());
        i += 1 + len;
    }
    let qtype = u16::from_be_bytes([*q.get(i + 1)?, *q.get(i + 2)?]);
    let question = &q[12..i + 5];
    let asked = labels.join(".");
    let found = asked == name;
    let a_record = found && qtype == 1;
    let mut r = Vec::new();
    r.extend_from_slice(&q[0..2]);
    // QR, RD, RA; NXDOMAIN for another name.
    r.extend_from_slice(&[0x81, if found { 0x80 } else { 0x83 }]);
    r.extend_from_slice(&[0, 1, 0, u8::from(a_record), 0, 0, 0, 0]);
    r.extend_from_slice(question);
    if a_record {
        // A pointer to the question's name, type A, class IN, TTL 60, 127.0.0.1.
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
    }
    Some(r)
}

fn in_chroot(root: &Path, url: &str) -> Output {
    Command::new("/usr/sbin/chroot")
        .arg(root)
        .args([
            "/node-bootstrap",
            "--log-format",
            "text",
            "metadata",
            "validate",
            "--allow-unsigned",
            url,
        ])
        .env_clear()
        .output()
        .unwrap()
}

#[test]
fn the_static_binary_resolves_names_in_a_root_without_libraries_or_nss() {
    if testkit::skip_unless_root("chroot and a name server on port 53")
        || testkit::skip_without(&["/usr/sbin/chroot"])
    {
        return;
    }
    let Some(bin) = testkit::cli::static_agent_binary() else {
        testkit::skip_because("no node-bootstrap-static: run scripts/build-static.sh");
        return;
    };
    // A mirror with unsigned metadata, as `metadata generate` writes it.
    let work = tempfile::tempdir().unwrap();
    let mirror = work.path().join("mirror");
    std::fs::create_dir_all(mirror.join("docker")).unwrap();
    std::fs::write(
        mirror.join("docker/docker-torcx_17.03.2_1632.3.0_amd64-usr.torcx.tgz"),
        b"not really a torcx image",
    )
    .unwrap();
    let out = testkit::cli::agent_command()
        .args(["metadata", "generate"])
        .arg(&mirror)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let server = testkit::pkgserver::PkgServer::start().unwrap();
    for f in testkit::files::files_below(&mirror) {
        let rel = f.strip_prefix(&mirror).unwrap().display().to_string();
        server.put(&format!("/mirror/{rel}"), std::fs::read(&f).unwrap());
    }
    let port = server.addr().port();

    // The root: the binary, the two files a stub resolver reads, nothing else.
    let root = work.path().join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::copy(&bin, root.join("node-bootstrap")).unwrap();
    std::fs::write(root.join("etc/hosts"), "127.0.0.1 mirror-by-hosts.test\n").unwrap();
    std::fs::write(
        root.join("etc/resolv.conf"),
        format!("nameserver {NAME_SERVER}\noptions timeout:1 attempts:2\n"),
    )
    .unwrap();
    // An nsswitch.conf that names only an NSS module this root does not
    // have, as Flatcar's names modules of its own (systemd-resolved's
    // `resolve`, `usrfiles`), which a static glibc could only load as
    // libraries of another glibc: glibc's getaddrinfo resolves nothing
    // here, so a name that resolves was resolved by the agent itself.
    std::fs::write(
        root.join("etc/nsswitch.conf"),
        "hosts: resolve [!UNAVAIL=return]\n",
    )
    .unwrap();
    // The CA bundle every HTTPS client loads when it is built (rustls'
    // platform verifier reads the OS's trust store), at the path Flatcar
    // and Debian keep it.
    std::fs::create_dir_all(root.join("etc/ssl/certs")).unwrap();
    std::fs::copy(
        "/etc/ssl/certs/ca-certificates.crt",
        root.join("etc/ssl/certs/ca-certificates.crt"),
    )
    .unwrap();
    // /dev/random and /dev/urandom, which seed the random numbers of TLS
    // and DNS (in a static binary the getrandom crate cannot look up
    // glibc's getrandom(3) with dlsym, and falls back to the devices).
    std::fs::create_dir_all(root.join("dev")).unwrap();
    for (dev, minor) in [("random", "8"), ("urandom", "9")] {
        let st = Command::new("mknod")
            .arg(root.join("dev").join(dev))
            .args(["c", "1", minor])
            .status()
            .unwrap();
        assert!(st.success(), "mknod /dev/{dev}");
    }
    let entries: Vec<String> = testkit::files::files_below(&root)
        .iter()
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert_eq!(entries.len(), 5, "regular files: {entries:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let dns = name_server("mirror-by-dns.test", stop.clone());
    for host in ["mirror-by-hosts.test", "mirror-by-dns.test"] {
        let out = in_chroot(&root, &format!("http://{host}:{port}/mirror"));
        assert_eq!(code(&out), 0, "{host}: {}{}", stdout(&out), stderr(&out));
        assert!(
            stdout(&out).contains("unsigned metadata, 1 products, 1 items, 0 problems"),
            "{host}: {}",
            stdout(&out)
        );
    }
    // A name neither knows: a network failure (3), naming the name.
    let out = in_chroot(&root, &format!("http://nowhere.test:{port}/mirror"));
    stop.store(true, Ordering::Relaxed);
    dns.join().unwrap();
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nowhere.test"),
        "the error does not name the host: {}",
        stderr(&out)
    );
}
