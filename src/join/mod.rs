//! The join, seen from the node: once kubelet.env is written, whether the
//! cluster knows this node, asked of the API server with the node's own
//! identity (or, while TLS bootstrapping has not yet earned the kubelet
//! one, with the bootstrap token: where its certificate request stands).

pub mod assess;
