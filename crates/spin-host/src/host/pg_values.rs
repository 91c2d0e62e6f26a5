//! Conversions between `spin:postgres/postgres@4.0.0` values and PostgreSQL's binary format.
//!
//! Results are read as raw bytes and decoded by the column's PostgreSQL type, so every type
//! maps to exactly one `db-value` case, and types the interface has no case for come back as
//! `unsupported` with their raw bytes instead of failing the whole query.
use std::error::Error as StdError;

use bytes::{BufMut, BytesMut};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc};
use postgres_types::{FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};
use rust_decimal::Decimal;

use crate::bindings::spin::postgres4_0_0::postgres::{DbDataType, DbValue, Interval, ParameterValue, RangeBoundKind};

type BoxError = Box<dyn StdError + Sync + Send>;

/// The raw bytes of one result cell, whatever its type.
pub(super) struct RawCell<'a>(pub &'a [u8]);

impl<'a> FromSql<'a> for RawCell<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(RawCell(raw))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

pub(super) fn data_type(ty: &Type) -> DbDataType {
    match *ty {
        Type::BOOL => DbDataType::Boolean,
        Type::CHAR => DbDataType::Int8,
        Type::INT2 => DbDataType::Int16,
        Type::INT4 => DbDataType::Int32,
        Type::INT8 => DbDataType::Int64,
        Type::FLOAT4 => DbDataType::Floating32,
        Type::FLOAT8 => DbDataType::Floating64,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => DbDataType::Str,
        Type::BYTEA => DbDataType::Binary,
        Type::DATE => DbDataType::Date,
        Type::TIME => DbDataType::Time,
        Type::TIMESTAMP | Type::TIMESTAMPTZ => DbDataType::Datetime,
        Type::UUID => DbDataType::Uuid,
        Type::JSONB | Type::JSON => DbDataType::Jsonb,
        Type::NUMERIC => DbDataType::Decimal,
        Type::INT4_RANGE => DbDataType::RangeInt32,
        Type::INT8_RANGE => DbDataType::RangeInt64,
        Type::NUM_RANGE => DbDataType::RangeDecimal,
        Type::INT4_ARRAY => DbDataType::ArrayInt32,
        Type::INT8_ARRAY => DbDataType::ArrayInt64,
        Type::NUMERIC_ARRAY => DbDataType::ArrayDecimal,
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::BPCHAR_ARRAY => DbDataType::ArrayStr,
        Type::INTERVAL => DbDataType::Interval,
        _ => DbDataType::Other(ty.name().to_owned()),
    }
}

/// Decodes one cell; `None` is SQL NULL.
pub(super) fn db_value(ty: &Type, raw: Option<&[u8]>) -> Result<DbValue, BoxError> {
    let Some(raw) = raw else { return Ok(DbValue::DbNull) };
    Ok(match data_type(ty) {
        DbDataType::Boolean => DbValue::Boolean(bool::from_sql(ty, raw)?),
        DbDataType::Int8 => DbValue::Int8(i8::from_sql(ty, raw)?),
        DbDataType::Int16 => DbValue::Int16(i16::from_sql(ty, raw)?),
        DbDataType::Int32 => DbValue::Int32(i32::from_sql(ty, raw)?),
        DbDataType::Int64 => DbValue::Int64(i64::from_sql(ty, raw)?),
        DbDataType::Floating32 => DbValue::Floating32(f32::from_sql(ty, raw)?),
        DbDataType::Floating64 => DbValue::Floating64(f64::from_sql(ty, raw)?),
        DbDataType::Str => DbValue::Str(String::from_sql(ty, raw)?),
        DbDataType::Binary => DbValue::Binary(raw.to_vec()),
        DbDataType::Date => {
            let d = NaiveDate::from_sql(ty, raw)?;
            DbValue::Date((d.year(), d.month() as u8, d.day() as u8))
        }
        DbDataType::Time => DbValue::Time(time_tuple(NaiveTime::from_sql(ty, raw)?)),
        // Both timestamp types read as UTC date-times; `timestamp` (unix seconds) is never reported.
        DbDataType::Datetime | DbDataType::Timestamp => {
            let dt = if *ty == Type::TIMESTAMPTZ {
                DateTime::<Utc>::from_sql(ty, raw)?.naive_utc()
            } else {
                NaiveDateTime::from_sql(ty, raw)?
            };
            let (h, m, s, ns) = time_tuple(dt.time());
            DbValue::Datetime((dt.year(), dt.month() as u8, dt.day() as u8, h, m, s, ns))
        }
        DbDataType::Uuid => DbValue::Uuid(uuid::Uuid::from_sql(ty, raw)?.to_string()),
        DbDataType::Jsonb => {
            // jsonb's binary form is a version byte followed by the JSON text.
            let text = if *ty == Type::JSONB { raw.get(1..).ok_or("empty jsonb")? } else { raw };
            DbValue::Jsonb(text.to_vec())
        }
        DbDataType::Decimal => DbValue::Decimal(Decimal::from_sql(ty, raw)?.to_string()),
        DbDataType::RangeInt32 => DbValue::RangeInt32(decode_range(raw, 0, |b| i32::from_sql(&Type::INT4, b))?),
        DbDataType::RangeInt64 => DbValue::RangeInt64(decode_range(raw, 0, |b| i64::from_sql(&Type::INT8, b))?),
        DbDataType::RangeDecimal => DbValue::RangeDecimal(decode_range(raw, "0".to_owned(), |b| {
            Decimal::from_sql(&Type::NUMERIC, b).map(|d| d.to_string())
        })?),
        DbDataType::ArrayInt32 => DbValue::ArrayInt32(Vec::<Option<i32>>::from_sql(ty, raw)?),
        DbDataType::ArrayInt64 => DbValue::ArrayInt64(Vec::<Option<i64>>::from_sql(ty, raw)?),
        DbDataType::ArrayDecimal => DbValue::ArrayDecimal(
            Vec::<Option<Decimal>>::from_sql(ty, raw)?.into_iter().map(|d| d.map(|d| d.to_string())).collect(),
        ),
        DbDataType::ArrayStr => DbValue::ArrayStr(Vec::<Option<String>>::from_sql(ty, raw)?),
        DbDataType::Interval => DbValue::Interval(decode_interval(raw)?),
        DbDataType::Other(_) => DbValue::Unsupported(raw.to_vec()),
    })
}

fn time_tuple(t: NaiveTime) -> (u8, u8, u8, u32) {
    (t.hour() as u8, t.minute() as u8, t.second() as u8, t.nanosecond())
}

fn decode_interval(raw: &[u8]) -> Result<Interval, BoxError> {
    let bytes: [u8; 16] = raw.try_into().map_err(|_| "interval must be 16 bytes")?;
    let micros = i64::from_be_bytes(bytes[0..8].try_into()?);
    let days = i32::from_be_bytes(bytes[8..12].try_into()?);
    let months = i32::from_be_bytes(bytes[12..16].try_into()?);
    Ok(Interval { micros, days, months })
}

// Range flags of PostgreSQL's binary range format.
const RANGE_EMPTY: u8 = 0x01;
const RANGE_LB_INC: u8 = 0x02;
const RANGE_UB_INC: u8 = 0x04;
const RANGE_LB_INF: u8 = 0x08;
const RANGE_UB_INF: u8 = 0x10;

type Bound<T> = Option<(T, RangeBoundKind)>;

fn decode_range<T: Clone>(
    raw: &[u8],
    zero: T,
    decode: impl Fn(&[u8]) -> Result<T, BoxError>,
) -> Result<(Bound<T>, Bound<T>), BoxError> {
    let (&flags, mut rest) = raw.split_first().ok_or("empty range")?;
    if flags & RANGE_EMPTY != 0 {
        // The interface has no "empty" case. (0,0) is empty, and PostgreSQL reads it back as
        // `empty`, so the value survives a round trip; absent bounds would mean "unbounded".
        let open_zero = Some((zero, RangeBoundKind::Exclusive));
        return Ok((open_zero.clone(), open_zero));
    }
    let mut read_bound = |present: bool, inclusive: bool| -> Result<Bound<T>, BoxError> {
        if !present {
            return Ok(None);
        }
        let (len, tail) = rest.split_at_checked(4).ok_or("truncated range")?;
        let len = i32::from_be_bytes(len.try_into()?) as usize;
        let (value, tail) = tail.split_at_checked(len).ok_or("truncated range")?;
        rest = tail;
        let kind = if inclusive { RangeBoundKind::Inclusive } else { RangeBoundKind::Exclusive };
        Ok(Some((decode(value)?, kind)))
    };
    let lower = read_bound(flags & RANGE_LB_INF == 0, flags & RANGE_LB_INC != 0)?;
    let upper = read_bound(flags & RANGE_UB_INF == 0, flags & RANGE_UB_INC != 0)?;
    Ok((lower, upper))
}

fn encode_range<T>(
    lower: &Bound<T>,
    upper: &Bound<T>,
    element: &Type,
    out: &mut BytesMut,
    encode: impl Fn(&T, &Type, &mut BytesMut) -> Result<(), BoxError>,
) -> Result<(), BoxError> {
    let mut flags = 0;
    match lower {
        None => flags |= RANGE_LB_INF,
        Some((_, RangeBoundKind::Inclusive)) => flags |= RANGE_LB_INC,
        Some(_) => {}
    }
    match upper {
        None => flags |= RANGE_UB_INF,
        Some((_, RangeBoundKind::Inclusive)) => flags |= RANGE_UB_INC,
        Some(_) => {}
    }
    out.put_u8(flags);
    for (value, _) in [lower, upper].into_iter().flatten() {
        let start = out.len();
        out.put_i32(0);
        encode(value, element, out)?;
        let len = i32::try_from(out.len() - start - 4)?;
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    }
    Ok(())
}

/// A query parameter, converted to whatever PostgreSQL type the statement declares for it.
#[derive(Debug)]
pub(super) struct Param(pub ParameterValue);

fn naive_datetime(v: (i32, u8, u8, u8, u8, u8, u32)) -> Result<NaiveDateTime, BoxError> {
    let date = NaiveDate::from_ymd_opt(v.0, v.1.into(), v.2.into()).ok_or("invalid date")?;
    let time = NaiveTime::from_hms_nano_opt(v.3.into(), v.4.into(), v.5.into(), v.6).ok_or("invalid time")?;
    Ok(NaiveDateTime::new(date, time))
}

fn decimal(s: &str) -> Result<Decimal, BoxError> {
    Ok(s.parse::<Decimal>()?)
}

/// Encodes `value` as `ty` if the Rust type accepts it, with a clear error otherwise.
fn encode<T: ToSql>(value: T, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    if !T::accepts(ty) {
        return Err(format!("cannot use {} as a parameter of type {}", std::any::type_name::<T>(), ty).into());
    }
    value.to_sql(ty, out)
}

fn range_element(ty: &Type) -> Result<Type, BoxError> {
    match ty.kind() {
        Kind::Range(inner) => Ok(inner.clone()),
        _ => Err(format!("a range parameter cannot be used as {ty}").into()),
    }
}

impl ToSql for Param {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match &self.0 {
            ParameterValue::Boolean(v) => encode(*v, ty, out),
            ParameterValue::Int8(v) => encode(*v, ty, out),
            ParameterValue::Int16(v) => encode(*v, ty, out),
            ParameterValue::Int32(v) => encode(*v, ty, out),
            ParameterValue::Int64(v) => encode(*v, ty, out),
            ParameterValue::Floating32(v) => encode(*v, ty, out),
            ParameterValue::Floating64(v) => encode(*v, ty, out),
            ParameterValue::Str(v) => encode(v.as_str(), ty, out),
            ParameterValue::Binary(v) => encode(v.as_slice(), ty, out),
            ParameterValue::Date((y, m, d)) => {
                encode(NaiveDate::from_ymd_opt(*y, (*m).into(), (*d).into()).ok_or("invalid date")?, ty, out)
            }
            ParameterValue::Time((h, m, s, ns)) => encode(
                NaiveTime::from_hms_nano_opt((*h).into(), (*m).into(), (*s).into(), *ns).ok_or("invalid time")?,
                ty,
                out,
            ),
            // Date-times are UTC by the interface's definition, so they fit either column type.
            ParameterValue::Datetime(v) => {
                let naive = naive_datetime(*v)?;
                if *ty == Type::TIMESTAMPTZ { encode(naive.and_utc(), ty, out) } else { encode(naive, ty, out) }
            }
            ParameterValue::Timestamp(secs) => {
                let at = DateTime::<Utc>::from_timestamp(*secs, 0).ok_or("timestamp out of range")?;
                if *ty == Type::TIMESTAMP { encode(at.naive_utc(), ty, out) } else { encode(at, ty, out) }
            }
            ParameterValue::Uuid(v) => encode(uuid::Uuid::parse_str(v)?, ty, out),
            ParameterValue::Jsonb(bytes) => {
                let value: serde_json::Value = serde_json::from_slice(bytes)?;
                encode(postgres_types::Json(value), ty, out)
            }
            ParameterValue::Decimal(v) => encode(decimal(v)?, ty, out),
            ParameterValue::RangeInt32((lo, hi)) => {
                let element = range_element(ty)?;
                encode_range(lo, hi, &element, out, |v, t, o| encode(*v, t, o).map(drop))?;
                Ok(IsNull::No)
            }
            ParameterValue::RangeInt64((lo, hi)) => {
                let element = range_element(ty)?;
                encode_range(lo, hi, &element, out, |v, t, o| encode(*v, t, o).map(drop))?;
                Ok(IsNull::No)
            }
            ParameterValue::RangeDecimal((lo, hi)) => {
                let element = range_element(ty)?;
                encode_range(lo, hi, &element, out, |v, t, o| encode(decimal(v)?, t, o).map(drop))?;
                Ok(IsNull::No)
            }
            ParameterValue::ArrayInt32(v) => encode(v.as_slice(), ty, out),
            ParameterValue::ArrayInt64(v) => encode(v.as_slice(), ty, out),
            ParameterValue::ArrayDecimal(v) => {
                let parsed = v.iter().map(|d| d.as_deref().map(decimal).transpose()).collect::<Result<Vec<_>, _>>()?;
                encode(parsed, ty, out)
            }
            ParameterValue::ArrayStr(v) => encode(v.as_slice(), ty, out),
            ParameterValue::Interval(i) => {
                if *ty != Type::INTERVAL {
                    return Err(format!("an interval parameter cannot be used as {ty}").into());
                }
                out.put_i64(i.micros);
                out.put_i32(i.days);
                out.put_i32(i.months);
                Ok(IsNull::No)
            }
            ParameterValue::DbNull => Ok(IsNull::Yes),
        }
    }

    // The real check happens per value in `to_sql`, which knows which case it holds.
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}
