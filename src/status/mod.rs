//! `node-bootstrap status`: where this node stands and why.
