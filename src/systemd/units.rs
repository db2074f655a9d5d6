//! Reading unit state (load/active/sub state, result, restarts, conditions).
