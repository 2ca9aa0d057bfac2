//! polld-testbed: the gen, fwd and sink namespaces.
