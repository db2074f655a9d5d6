//! kubelet.env: parsing the seed file and rendering the real one in
//! systemd EnvironmentFile syntax.
