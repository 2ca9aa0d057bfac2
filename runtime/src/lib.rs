//! polld-runtime: `polld run`, the dataplane on real devices in real time.
