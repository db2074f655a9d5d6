//! The `run` flow: phases as data, a pure decision of what comes next, and
//! the driver that executes it against the node's seams.
