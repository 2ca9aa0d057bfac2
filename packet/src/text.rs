//! Text forms for config values: serde (de)serializes these types through their
//! `Display`/`FromStr`, so TOML and JSON show `10.0.1.1/24` and `02:00:00:00:00:01`.

/// Implements `Serialize` (via `Display`) and `Deserialize` (via `FromStr`, whose error
/// message becomes the serde error) for a type.
macro_rules! serde_via_str {
    ($ty:ty) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use serde_via_str;
