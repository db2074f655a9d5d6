//! Cluster version discovery: which Kubernetes version this node joins.
//! (Forced by config, else the API server's `/version`, else the seed
//! kubelet.env's `KUBELET_IMAGE_TAG`; and the version-skew check.)

pub mod config;
