//! The serde plumbing of [`ActionSpec`]: the entry's keys are read one by one, and an action key
//! and its value are handed to [`ActionKind`]'s derived (externally tagged) deserializer as if
//! they were a one-entry table of their own.

use super::{ActionKind, ActionSpec, ACTION_FIELDS, ACTION_KEYS};
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, VariantAccess};
use serde::Deserialize;
use std::fmt;

/// Reads an `[[actions]]` table.
pub(super) struct EntryVisitor;

impl<'de> de::Visitor<'de> for EntryVisitor {
    type Value = ActionSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an action table")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ActionSpec, A::Error> {
        let (mut at, mut every, mut times) = (None, None, None);
        let (mut timeout, mut allow_fail, mut namespace, mut wait) = (None, None, None, None);
        let mut probe = None;
        let mut actions = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            match key {
                "at" => at = Some(map.next_value()?),
                "every" => every = Some(map.next_value()?),
                "times" => times = Some(map.next_value()?),
                "timeout" => timeout = Some(map.next_value()?),
                "allow_fail" => allow_fail = Some(map.next_value()?),
                "namespace" => namespace = Some(map.next_value()?),
                "wait" => wait = Some(map.next_value()?),
                "probe" => probe = Some(map.next_value()?),
                action => actions.push(map.next_value_seed(Tagged(action))?),
            }
        }
        let at = at.ok_or_else(|| de::Error::missing_field("at"))?;
        if actions.len() != 1 {
            return Err(de::Error::custom(format!(
                "an action needs exactly one of {} (found {})",
                ACTION_KEYS.join(", "),
                actions.len()
            )));
        }
        let action = actions.remove(0);
        let manifest = matches!(action, ActionKind::Apply(_) | ActionKind::Delete(_));
        if wait.is_some() && !manifest {
            return Err(de::Error::custom(
                "`wait` belongs to an `apply` or `delete` action",
            ));
        }
        let probed =
            manifest || matches!(action, ActionKind::RolloutRestart(_) | ActionKind::Scale(_));
        if probe.is_some() && !probed {
            return Err(de::Error::custom(
                "`probe` belongs to an `apply`, `delete`, `rollout_restart` or `scale` \
                 action (a templated `grow` takes its own: grow = { template = ..., probe = \
                 { ... } })",
            ));
        }
        let exec = matches!(action, ActionKind::Exec(_));
        if allow_fail.is_some() && !exec {
            return Err(de::Error::custom(
                "`allow_fail` belongs to an `exec` action",
            ));
        }
        if timeout.is_some() && !exec && wait.is_none() {
            return Err(de::Error::custom(
                "`timeout` belongs to an `exec` action, or to an `apply` or `delete` with \
                 `wait` (a probe's is `probe.timeout`)",
            ));
        }
        let cluster = matches!(
            action,
            ActionKind::Apply(_)
                | ActionKind::Delete(_)
                | ActionKind::RolloutRestart(_)
                | ActionKind::DeletePod(_)
                | ActionKind::Scale(_)
        );
        if namespace.is_some() && !cluster {
            return Err(de::Error::custom(
                "`namespace` belongs to a cluster action (apply, delete, rollout_restart, \
                 delete_pod, scale)",
            ));
        }
        Ok(ActionSpec {
            at,
            every,
            times,
            action,
            timeout,
            allow_fail,
            namespace,
            wait,
            probe,
        })
    }
}

/// A key of an action table; an unknown one is refused at its own line.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        let k = String::deserialize(d)?;
        ACTION_FIELDS
            .iter()
            .find(|f| **f == k)
            .copied()
            .ok_or_else(|| de::Error::unknown_field(&k, &ACTION_FIELDS))
    }
}

/// The value of action key `.0`, read as the [`ActionKind`] variant of that name.
struct Tagged(&'static str);

impl<'de> DeserializeSeed<'de> for Tagged {
    type Value = ActionKind;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ActionKind, D::Error> {
        ActionKind::deserialize(OneEntry {
            tag: self.0,
            value: d,
        })
    }
}

/// A tag and the deserializer of its value, seen as an externally tagged enum.
struct OneEntry<D> {
    tag: &'static str,
    value: D,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for OneEntry<D> {
    type Error = D::Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        v.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de, D: Deserializer<'de>> EnumAccess<'de> for OneEntry<D> {
    type Error = D::Error;
    type Variant = Value<D>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Value<D>), D::Error> {
        let tag = seed.deserialize(de::value::StrDeserializer::<D::Error>::new(self.tag))?;
        Ok((tag, Value(self.value)))
    }
}

/// The value of a variant: every [`ActionKind`] variant holds exactly one.
struct Value<D>(D);

impl<'de, D: Deserializer<'de>> VariantAccess<'de> for Value<D> {
    type Error = D::Error;

    fn unit_variant(self) -> Result<(), D::Error> {
        <()>::deserialize(self.0)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, D::Error> {
        seed.deserialize(self.0)
    }

    fn tuple_variant<V: de::Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, v)
    }

    fn struct_variant<V: de::Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct("", fields, v)
    }
}
