//! Python objects read as serde data: a dict of a decision becomes a
//! `Decision` without an intermediate JSON value (`Decision::from_deserializer`).
//! The types are JSON's: dict (str keys), list or tuple, str, int, float
//! (finite), bool and None; a `Decision` inside is read as its JSON.

use std::borrow::Cow;
#[cfg(not(windows))]
use std::ffi::c_char;

#[cfg(not(windows))]
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use crate::PyDecision;

/// Why a Python object could not be read; the caller adds the field's path.
#[derive(Debug)]
pub struct DeError(String);

impl std::fmt::Display for DeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        DeError(msg.to_string())
    }
}

fn python(e: PyErr) -> DeError {
    DeError(e.to_string())
}

/// The text of a Python str, borrowed from the str: CPython keeps its
/// UTF-8 form (for ASCII text, the characters themselves; otherwise a copy
/// it makes once and keeps with the str), so nothing is copied per read.
/// PyO3's `to_cow` under abi3-py39 makes a bytes object and a copy of each,
/// a tenth of a decision's conversion with its many keys.
/// `PyUnicode_AsUTF8AndSize` is in the limited API from 3.10, and before
/// that exported by libpython on Linux and macOS but not by Windows'
/// `python3.dll`: Windows keeps PyO3's way.
#[cfg(not(windows))]
fn text<'a>(s: &'a Bound<'_, PyString>) -> Result<Cow<'a, str>, DeError> {
    extern "C" {
        fn PyUnicode_AsUTF8AndSize(unicode: *mut ffi::PyObject, size: *mut ffi::Py_ssize_t) -> *const c_char;
    }
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a live str (the GIL is held: `Bound`); on success the
    // pointer is to `size` bytes of UTF-8 owned by `s`, which outlives 'a.
    let data = unsafe { PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
    if data.is_null() {
        return Err(python(PyErr::fetch(s.py())));
    }
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size as usize) };
    // SAFETY: CPython returned UTF-8 (a str with lone surrogates fails above).
    Ok(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) }))
}

#[cfg(windows)]
fn text<'a>(s: &'a Bound<'_, PyString>) -> Result<Cow<'a, str>, DeError> {
    s.to_cow().map_err(python)
}

/// One Python object as a serde deserializer.
#[derive(Clone, Copy)]
pub struct PyDe<'a, 'py>(pub &'a Bound<'py, PyAny>);

impl<'de> de::Deserializer<'de> for PyDe<'_, '_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let obj = self.0;
        // The common types first.
        if let Ok(s) = obj.cast::<PyString>() {
            return visitor.visit_str(&text(s)?);
        }
        if let Ok(dict) = obj.cast::<PyDict>() {
            return visitor.visit_map(DictAccess { items: dict.iter(), value: None });
        }
        if obj.is_none() {
            return visitor.visit_unit();
        }
        if obj.is_instance_of::<PyBool>() {
            return visitor.visit_bool(obj.extract().map_err(python)?);
        }
        if obj.is_instance_of::<PyInt>() {
            if let Ok(i) = obj.extract::<i64>() {
                return visitor.visit_i64(i);
            }
            if let Ok(u) = obj.extract::<u64>() {
                return visitor.visit_u64(u);
            }
            return Err(DeError("integer out of the 64-bit range".into()));
        }
        if obj.is_instance_of::<PyFloat>() {
            let f: f64 = obj.extract().map_err(python)?;
            if !f.is_finite() {
                return Err(DeError(format!("{f} is not a finite number")));
            }
            return visitor.visit_f64(f);
        }
        // By index, not through a Python iterator: that would be an object
        // for the cyclic GC to count, and enough of them start collections
        // that walk every object the caller holds (5 % of a large `insert_many`).
        if let Ok(list) = obj.cast::<PyList>() {
            return visitor.visit_seq(SeqItems::List(list.iter()));
        }
        if let Ok(tuple) = obj.cast::<PyTuple>() {
            return visitor.visit_seq(SeqItems::Tuple(tuple.iter()));
        }
        if let Ok(d) = obj.cast::<PyDecision>() {
            return de::Deserializer::deserialize_any(d.get().inner.to_json_value(), visitor)
                .map_err(de::Error::custom);
        }
        let name = obj.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string());
        Err(DeError(format!("a {name} is not JSON (dict, list, str, int, float, bool or None)")))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.0.is_none() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    /// A unit variant is its name, as in JSON (`"prompt_definition"`).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.0.cast::<PyString>() {
            Ok(s) => visitor.visit_enum(<&str>::into_deserializer(&text(s)?)),
            Err(_) => {
                let _ = (name, variants);
                self.deserialize_any(visitor)
            }
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

struct DictAccess<'py> {
    items: pyo3::types::iter::BoundDictIterator<'py>,
    value: Option<Bound<'py, PyAny>>,
}

impl<'de, 'py> MapAccess<'de> for DictAccess<'py> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DeError> {
        let Some((key, value)) = self.items.next() else { return Ok(None) };
        let Ok(key) = key.cast::<PyString>() else {
            let shown = key.repr().map_or_else(|_| "?".into(), |r| r.to_string());
            return Err(DeError(format!("key {shown} is not a string")));
        };
        self.value = Some(value);
        seed.deserialize(<&str>::into_deserializer(&text(key)?)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let value = self.value.take().ok_or_else(|| DeError("a value without its key".into()))?;
        seed.deserialize(PyDe(&value))
    }
}

enum SeqItems<'py> {
    List(pyo3::types::iter::BoundListIterator<'py>),
    Tuple(pyo3::types::iter::BoundTupleIterator<'py>),
}

impl<'de> SeqAccess<'de> for SeqItems<'_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DeError> {
        let item = match self {
            SeqItems::List(items) => items.next(),
            SeqItems::Tuple(items) => items.next(),
        };
        match item {
            None => Ok(None),
            Some(item) => seed.deserialize(PyDe(&item)).map(Some),
        }
    }
}
