//! The one way a request body becomes a typed value (the service's wire types, the studio's
//! commands): a struct is read only from a JSON object, at every depth; nothing may follow the
//! value; an error names the field it happened at.
//!
//! serde's derived `Deserialize` for a struct also accepts a JSON array and reads the fields
//! from it in declaration order, so `["change it","u1"]` would decode as a request. Go's
//! `encoding/json` refuses that, and so do we: [`Objects`] wraps a deserializer and every
//! deserializer, visitor and seed it hands down, and refuses a sequence wherever a struct (or
//! a struct variant) is expected.

use std::fmt;

use serde::de::{
    DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, Error as _, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde_json::Value;

/// Why a body did not decode; its text names the problem and, below the top level, the field.
#[derive(Debug)]
pub struct DecodeError {
    /// Where the problem is (`target.display`, `list[1]`); empty at the top level.
    path: String,
    source: serde_json::Error,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.source)
        } else {
            write!(f, "{}: {}", self.path, self.source)
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Decodes one JSON value of type `T` from `bytes` (see the module docs for the rules).
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(Objects(&mut json)).map_err(|error| {
        let path = error.path().to_string();
        DecodeError {
            path: if path == "." { String::new() } else { path },
            source: error.into_inner(),
        }
    })?;
    json.end().map_err(|source| DecodeError {
        path: String::new(),
        source,
    })?;
    Ok(value)
}

/// Decodes `T` from an already parsed value under the same rules (for fields read in two steps).
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    T::deserialize(Objects(value))
}

/// A deserializer that refuses sequences where structs are expected, at every depth.
struct Objects<D>(D);

/// A visitor passed down by [`Objects`]; `object` marks a struct position.
struct Checked<V> {
    visitor: V,
    object: bool,
}

impl<V> Checked<V> {
    fn any(visitor: V) -> Self {
        Checked {
            visitor,
            object: false,
        }
    }

    fn object(visitor: V) -> Self {
        Checked {
            visitor,
            object: true,
        }
    }
}

/// Forwards `deserialize_*` methods to the inner deserializer with a [`Checked`] visitor.
macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method($($arg,)* Checked::any(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Objects<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_struct(name, fields, Checked::object(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// Forwards `visit_*` methods of scalar values unchanged.
macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method<E: serde::de::Error>(self, value: $ty) -> Result<Self::Value, E> {
            self.visitor.$method(value)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Checked<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.object {
            formatter.write_str("a JSON object")
        } else {
            self.visitor.expecting(formatter)
        }
    }

    forward_visit! {
        visit_bool(bool);
        visit_i8(i8);
        visit_i16(i16);
        visit_i32(i32);
        visit_i64(i64);
        visit_i128(i128);
        visit_u8(u8);
        visit_u16(u16);
        visit_u32(u32);
        visit_u64(u64);
        visit_u128(u128);
        visit_f32(f32);
        visit_f64(f64);
        visit_char(char);
        visit_str(&str);
        visit_borrowed_str(&'de str);
        visit_string(String);
        visit_bytes(&[u8]);
        visit_borrowed_bytes(&'de [u8]);
        visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.visitor.visit_some(Objects(deserializer))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        self.visitor.visit_newtype_struct(Objects(deserializer))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        if self.object {
            return Err(A::Error::invalid_type(Unexpected::Seq, &self));
        }
        self.visitor.visit_seq(Objects(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_map(Objects(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_enum(Objects(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Objects<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Objects(deserializer))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Objects<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Objects(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Objects<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Objects(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Objects(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Objects<A> {
    type Error = A::Error;
    type Variant = Objects<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(Objects(seed))?;
        Ok((value, Objects(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Objects<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Objects(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Checked::any(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Checked::object(visitor))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct Inner {
        name: String,
    }

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct Outer {
        content: String,
        inner: Inner,
        maybe: Option<Inner>,
        list: Vec<Inner>,
        tags: Vec<String>,
        free: Value,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    enum Shape {
        Dot,
        Named { name: String },
    }

    fn error<T: DeserializeOwned + fmt::Debug>(text: &str) -> String {
        from_slice::<T>(text.as_bytes())
            .expect_err(text)
            .to_string()
    }

    #[test]
    fn objects_decode_as_before() {
        let outer: Outer = from_slice(
            br#"{"content":"c","inner":{"name":"a"},"maybe":{"name":"b"},
                 "list":[{"name":"x"}],"tags":["t"],"free":[1,{"k":[]}]}"#,
        )
        .unwrap();
        assert_eq!(outer.inner.name, "a");
        assert_eq!(outer.maybe.unwrap().name, "b");
        assert_eq!(outer.list[0].name, "x");
        assert_eq!(outer.tags, vec!["t"]);
        assert_eq!(outer.free, serde_json::json!([1, {"k": []}]));
        let shape: Shape = from_slice(br#"{"Named":{"name":"n"}}"#).unwrap();
        assert_eq!(shape, Shape::Named { name: "n".into() });
        assert_eq!(from_slice::<Shape>(br#""Dot""#).unwrap(), Shape::Dot);
    }

    #[test]
    fn a_sequence_is_no_struct_at_any_depth() {
        assert!(error::<Outer>(r#"["change it"]"#).contains("expected a JSON object"));
        assert!(error::<Outer>("[]").contains("invalid type: sequence"));
        let nested = error::<Outer>(r#"{"inner":["a"]}"#);
        assert!(
            nested.starts_with("inner: invalid type: sequence"),
            "{nested}"
        );
        let option = error::<Outer>(r#"{"maybe":["a"]}"#);
        assert!(option.starts_with("maybe: "), "{option}");
        let item = error::<Outer>(r#"{"list":[{"name":"ok"},["a"]]}"#);
        assert!(item.starts_with("list[1]: "), "{item}");
        let variant = error::<Shape>(r#"{"Named":["n"]}"#);
        assert!(variant.contains("expected a JSON object"), "{variant}");
    }

    #[test]
    fn other_wrong_types_name_the_field() {
        assert!(error::<Outer>(r#""text""#).contains("expected a JSON object"));
        assert!(error::<Outer>("7").contains("expected a JSON object"));
        let field = error::<Outer>(r#"{"content":5}"#);
        assert!(
            field.starts_with("content: invalid type: integer"),
            "{field}"
        );
        assert!(error::<Outer>(r#"{} {}"#).contains("trailing characters"));
    }

    #[test]
    fn values_read_in_two_steps_follow_the_same_rules() {
        assert!(from_value::<Inner>(serde_json::json!(["a"])).is_err());
        assert_eq!(
            from_value::<Inner>(serde_json::json!({"name": "a"})).unwrap(),
            Inner { name: "a".into() }
        );
    }
}
