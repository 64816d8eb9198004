//! Integers in request bodies. JSON has one number type, and JSON Schema's
//! `integer` is any number without a fractional part, so `891.0` is the
//! integer 891; `891.5` is refused. Used with `#[serde(deserialize_with)]`.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserializer;
use serde::de::{self, Unexpected, Visitor};

/// An integer field: `1`, `-1` or `1.0`, within `T`'s range.
pub fn required<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    d.deserialize_any(Integer(PhantomData))
}

/// An integer field that may be `null` (or absent, with `#[serde(default)]`).
pub fn optional<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    d.deserialize_option(Optional(PhantomData))
}

struct Integer<T>(PhantomData<T>);

impl<T: TryFrom<u64> + TryFrom<i64>> Visitor<'_> for Integer<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer in range")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // 2^64 and -2^63 are exact in f64; integral values between them
        // convert exactly.
        if v.fract() != 0.0 || !(-9.223_372_036_854_776e18..1.844_674_407_370_955_2e19).contains(&v)
        {
            return Err(E::invalid_value(Unexpected::Float(v), &self));
        }
        if v >= 0.0 {
            self.visit_u64(v as u64)
        } else {
            self.visit_i64(v as i64)
        }
    }
}

struct Optional<T>(PhantomData<T>);

impl<'de, T: TryFrom<u64> + TryFrom<i64>> Visitor<'de> for Optional<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        required(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Shape {
        #[serde(deserialize_with = "super::required")]
        small: i32,
        #[serde(default, deserialize_with = "super::optional")]
        big: Option<u64>,
    }

    fn parse(json: &str) -> Result<Shape, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn integral_floats_are_integers_and_fractions_are_refused() {
        assert_eq!(
            parse(r#"{"small": -3.0, "big": 891.0}"#),
            Ok(Shape {
                small: -3,
                big: Some(891)
            })
        );
        assert_eq!(
            parse(r#"{"small": 7, "big": null}"#),
            Ok(Shape {
                small: 7,
                big: None
            })
        );
        assert_eq!(parse(r#"{"small": 7}"#).unwrap().big, None);
        for bad in [
            r#"{"small": 1.5}"#,
            r#"{"small": 1e10}"#,
            r#"{"small": 1, "big": -1}"#,
            r#"{"small": 1, "big": -1.0}"#,
            r#"{"small": 1, "big": 1e30}"#,
            r#"{"small": "1"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
