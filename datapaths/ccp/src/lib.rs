//! CCP wire protocol and datapath-program interpreter.
