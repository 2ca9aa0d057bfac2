//! placeholder until the sim lands
