//! Sequences: `POST /sequences/{typeCode}/next` and the `sequence` member of a create command.
//!
//! A draw takes the next number of the caller's tenant's sequence `typeCode` (with up to five
//! `code1`..`code5` parameters) for the current period of its rotation, and formats it:
//!
//! - **rotation** (`rotateBy`): `none` (one counter forever), `yearly` (`yyyy`), `fiscal_yearly`
//!   (the calendar year the fiscal year starts in), `monthly` (`yyyymm`), `daily` (`yyyymmdd`): the
//!   counter row is `SEQ#tenant` / `typeCode[#code1..#code5]#rotateValue`, so each period counts
//!   from 1;
//! - **format**: the tenant's master data `MASTER#tenant` / `MASTER_DATA#typeCode` (else
//!   `common`'s, else `%%no%%`): `format` with words between `%%` (`no`, `fiscal_year`, `year`,
//!   `month`, `day`, `code1`..`code5`; `%%no#:0>6%%` pads `no` with `0` to 6 characters),
//!   `startMonth` (1-12, default 4) and `registerDate` (fiscal years are counted from 1953, or
//!   from the register date, whose month then starts the fiscal year), and optionally a default
//!   `rotateBy`;
//! - **time zone**: the setting `MASTER#tenant` / `SETTING#sequence#timeZone` (else `common`'s),
//!   attribute `value`, a UTC offset such as `+09:00`; default UTC. The period and the date words
//!   are those of the local date there.
//!
//! Where mbc-cqrs-serverless is inconsistent this module does it one way: the fiscal rotation
//! honours `startMonth` (and the register date's month) exactly as the `fiscal_year` word does
//! (mbc rotates on April whatever `startMonth` says), dates are taken in the configured time zone
//! (mbc uses the server's, assuming Japan time), only the words between `%%` are replaced (mbc
//! also replaces literal text equal to a word name), an unknown word or a code the format needs
//! but the draw lacks is a 400 before any number is drawn (mbc prints the word), and codes must be
//! given in order (`code2` needs `code1`).
//!
//! The counter is one `UpdateItem` (`SET seq = if_not_exists(seq, 0) + 1`, see
//! `cqrs_store::sequence`), so concurrent draws never repeat or skip a number. A number drawn for
//! a command that then fails is not given back: numbering has gaps when commands fail.

use chrono::{
    DateTime, Datelike, FixedOffset, NaiveDate, NaiveTime, Offset, SecondsFormat, TimeZone, Utc,
};
use cqrs_caller::Caller;
use cqrs_item::{Item, Value};
use cqrs_keys::master::{sequence_format_sk, sequence_sk, setting_sk, tenant_seq_pk};
use cqrs_problem::ApiError;
use cqrs_store::{Store, sequence::SequenceDraw};
use serde::{Deserialize, Serialize};

/// The format used when neither the tenant nor `common` has master data for a sequence (mbc's).
///
/// ```
/// assert_eq!(cqrs_command_handler::sequence::DEFAULT_FORMAT, "%%no%%");
/// ```
pub const DEFAULT_FORMAT: &str = "%%no%%";

/// The fiscal year's first month when the master data names none (April, as in mbc).
///
/// ```
/// assert_eq!(cqrs_command_handler::sequence::DEFAULT_START_MONTH, 4);
/// ```
pub const DEFAULT_START_MONTH: u32 = 4;

/// The year fiscal years are counted from without a register date (mbc's: 1953 is fiscal year 1).
///
/// ```
/// assert_eq!(cqrs_command_handler::sequence::FISCAL_REFERENCE_YEAR, 1953);
/// ```
pub const FISCAL_REFERENCE_YEAR: i32 = 1953;

/// The setting category and code of the sequences' time zone.
///
/// ```
/// assert_eq!(cqrs_command_handler::sequence::TIME_ZONE_SETTING, ("sequence", "timeZone"));
/// ```
pub const TIME_ZONE_SETTING: (&str, &str) = ("sequence", "timeZone");

/// The widest padding a format word may ask for.
pub const MAX_PAD_WIDTH: usize = 64;

/// When a sequence's counter restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RotateBy {
    /// Never: one counter.
    #[default]
    None,
    /// Every calendar year.
    Yearly,
    /// Every fiscal year (starting in `startMonth`).
    FiscalYearly,
    /// Every month.
    Monthly,
    /// Every day.
    Daily,
}

impl RotateBy {
    /// The name as in requests and in the counter row's `name`.
    ///
    /// ```
    /// use cqrs_command_handler::sequence::RotateBy;
    /// assert_eq!(RotateBy::FiscalYearly.as_str(), "fiscal_yearly");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            RotateBy::None => "none",
            RotateBy::Yearly => "yearly",
            RotateBy::FiscalYearly => "fiscal_yearly",
            RotateBy::Monthly => "monthly",
            RotateBy::Daily => "daily",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            RotateBy::None,
            RotateBy::Yearly,
            RotateBy::FiscalYearly,
            RotateBy::Monthly,
            RotateBy::Daily,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }
}

/// `code1`..`code5` of a draw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceParams {
    /// First code.
    pub code1: Option<String>,
    /// Second code (needs `code1`).
    pub code2: Option<String>,
    /// Third code.
    pub code3: Option<String>,
    /// Fourth code.
    pub code4: Option<String>,
    /// Fifth code.
    pub code5: Option<String>,
}

impl SequenceParams {
    /// The codes given, in order; a gap (`code2` without `code1`) is a 400.
    fn codes(&self) -> Result<Vec<&str>, ApiError> {
        let all = [
            &self.code1,
            &self.code2,
            &self.code3,
            &self.code4,
            &self.code5,
        ];
        let given = all.iter().take_while(|c| c.is_some()).count();
        if let Some(late) = all.iter().skip(given).position(|c| c.is_some()) {
            return Err(ApiError::bad_field(
                format!("params.code{}", given + late + 1),
                format!(
                    "given without params.code{}: codes are given in order",
                    given + 1
                ),
            ));
        }
        Ok(all.iter().filter_map(|c| c.as_deref()).collect())
    }
}

/// The body of `POST /sequences/{typeCode}/next` (every member optional; an empty body is `{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NextRequest {
    /// The rotation; default the master data's `rotateBy`, else `none`.
    pub rotate_by: Option<RotateBy>,
    /// `code1`..`code5`.
    #[serde(default)]
    pub params: SequenceParams,
    /// The day to draw for (`YYYY-MM-DD`, in the sequence time zone, or an RFC 3339 instant);
    /// default now.
    pub date: Option<String>,
    /// Text put before the formatted number.
    pub prefix: Option<String>,
    /// Text put after the formatted number.
    pub postfix: Option<String>,
    /// Another tenant's sequence (only a `system_admin`); default the caller's tenant.
    pub tenant_code: Option<String>,
}

/// The `sequence` member of a create command: draw a number into `attribute`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandSequence {
    /// The attribute that receives the formatted number (the item's `seq` gets the number).
    pub attribute: String,
    /// The sequence.
    pub type_code: String,
    /// The rotation; default the master data's `rotateBy`, else `none`.
    pub rotate_by: Option<RotateBy>,
    /// `code1`..`code5`.
    #[serde(default)]
    pub params: SequenceParams,
    /// Text put before the formatted number.
    pub prefix: Option<String>,
    /// Text put after the formatted number.
    pub postfix: Option<String>,
}

/// A drawn number, as `POST /sequences/{typeCode}/next` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drawn {
    /// The counter row's id (`SEQ#tenant#typeCode[#codes]#rotateValue`).
    pub id: String,
    /// `SEQ#tenant`.
    pub pk: String,
    /// `typeCode[#codes]#rotateValue`.
    pub sk: String,
    /// The number.
    pub no: i64,
    /// The number formatted, with prefix and postfix.
    pub formatted_no: String,
    /// When (the draw's date in the sequence time zone), RFC 3339.
    pub issued_at: String,
    /// The rotation applied.
    pub rotate_by: RotateBy,
    /// The period (`none`, `yyyy`, `yyyymm`, `yyyymmdd`).
    pub rotate_value: String,
    /// The fiscal year number (`%%fiscal_year%%`).
    pub fiscal_year: i64,
    /// Where the format came from: `tenant`, `common` or `default`.
    pub format_source: &'static str,
    /// The time zone the date was taken in (`+09:00`, `UTC`).
    pub time_zone: String,
}

/// One piece of a format: literal text, or a word between `%%` with optional padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text copied as it is.
    Literal(String),
    /// A word (`no`, `year`, ...), padded on the left with `fill` to `width`.
    Word {
        /// The word.
        name: String,
        /// `(fill, width)` from `#:F>W`.
        pad: Option<(char, usize)>,
    },
}

const WORDS: [&str; 10] = [
    "no",
    "fiscal_year",
    "year",
    "month",
    "day",
    "code1",
    "code2",
    "code3",
    "code4",
    "code5",
];

/// Parses a format: the text between `%%` pairs is a word (optionally `word#:F>W`), the rest is
/// literal. An unpaired `%%`, an unknown word or a bad padding is an error.
///
/// ```
/// use cqrs_command_handler::sequence::{Piece, parse_format};
///
/// let pieces = parse_format("INV-%%year%%-%%no#:0>6%%").unwrap();
/// assert_eq!(pieces[0], Piece::Literal("INV-".into()));
/// assert_eq!(pieces[3], Piece::Word { name: "no".into(), pad: Some(('0', 6)) });
/// assert!(parse_format("%%colour%%").is_err());
/// assert!(parse_format("%%no").is_err());
/// ```
pub fn parse_format(format: &str) -> Result<Vec<Piece>, String> {
    let parts: Vec<&str> = format.split("%%").collect();
    if parts.len().is_multiple_of(2) {
        return Err(format!("{format:?} has an unpaired %%"));
    }
    let mut pieces = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 0 {
            if !part.is_empty() {
                pieces.push(Piece::Literal((*part).to_string()));
            }
            continue;
        }
        let (name, pad) = match part.split_once('#') {
            None => (*part, None),
            Some((name, spec)) => (name, Some(parse_pad(spec)?)),
        };
        if !WORDS.contains(&name) {
            return Err(format!(
                "unknown word %%{name}%%: one of {}",
                WORDS.map(|w| format!("%%{w}%%")).join(", ")
            ));
        }
        pieces.push(Piece::Word {
            name: name.to_string(),
            pad,
        });
    }
    Ok(pieces)
}

/// `:F>W`: fill character `F`, width `W` (1 to [`MAX_PAD_WIDTH`]).
fn parse_pad(spec: &str) -> Result<(char, usize), String> {
    let bad = || format!("padding {spec:?}: write it as :F>W, e.g. :0>6");
    let rest = spec.strip_prefix(':').ok_or_else(bad)?;
    let mut chars = rest.chars();
    let fill = chars.next().ok_or_else(bad)?;
    let width = chars.as_str().strip_prefix('>').ok_or_else(bad)?;
    let width: usize = width.parse().map_err(|_| bad())?;
    if width == 0 || width > MAX_PAD_WIDTH {
        return Err(format!("padding width {width}: 1 to {MAX_PAD_WIDTH}"));
    }
    Ok((fill, width))
}

/// The values a format's words take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatValues<'a> {
    /// The number.
    pub no: i64,
    /// The fiscal year number.
    pub fiscal_year: i64,
    /// The local date.
    pub date: NaiveDate,
    /// `code1`..`code5` given.
    pub codes: &'a [&'a str],
}

/// Renders parsed pieces; a code word whose code was not given is an error naming it.
///
/// ```
/// use chrono::NaiveDate;
/// use cqrs_command_handler::sequence::{FormatValues, parse_format, render};
///
/// let pieces = parse_format("%%code1%%-%%fiscal_year%%-%%month#:0>2%%-%%no#:0>4%%").unwrap();
/// let values = FormatValues {
///     no: 7,
///     fiscal_year: 74,
///     date: NaiveDate::from_ymd_opt(2026, 3, 9).unwrap(),
///     codes: &["A"],
/// };
/// assert_eq!(render(&pieces, &values).unwrap(), "A-74-03-0007");
/// ```
pub fn render(pieces: &[Piece], values: &FormatValues<'_>) -> Result<String, String> {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Literal(text) => out.push_str(text),
            Piece::Word { name, pad } => {
                let text = word_value(name, values)?;
                if let Some((fill, width)) = pad {
                    let len = text.chars().count();
                    out.extend(std::iter::repeat_n(*fill, width.saturating_sub(len)));
                }
                out.push_str(&text);
            }
        }
    }
    Ok(out)
}

fn word_value(name: &str, values: &FormatValues<'_>) -> Result<String, String> {
    Ok(match name {
        "no" => values.no.to_string(),
        "fiscal_year" => values.fiscal_year.to_string(),
        "year" => values.date.year().to_string(),
        "month" => values.date.month().to_string(),
        "day" => values.date.day().to_string(),
        code => {
            let index = code
                .strip_prefix("code")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| (1..=5).contains(n))
                .ok_or_else(|| format!("unknown word %%{code}%%"))?;
            values
                .codes
                .get(index - 1)
                .map(|c| (*c).to_string())
                .ok_or_else(|| {
                    format!("the format uses %%{code}%% but params.{code} is not given")
                })?
        }
    })
}

/// The fiscal year of `date`: the calendar year it starts in, and its number counted from
/// [`FISCAL_REFERENCE_YEAR`] (or from the register date's year), 1-based. The year starts in
/// `start_month`, or in the register date's month when there is one (as in mbc).
///
/// ```
/// use chrono::NaiveDate;
/// use cqrs_command_handler::sequence::fiscal_year;
///
/// let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
/// assert_eq!(fiscal_year(day(2026, 3, 31), 4, None), (2025, 73));
/// assert_eq!(fiscal_year(day(2026, 4, 1), 4, None), (2026, 74));
/// assert_eq!(fiscal_year(day(2026, 4, 1), 10, None), (2025, 73));
/// assert_eq!(fiscal_year(day(2026, 7, 1), 4, Some(day(2020, 7, 15))), (2026, 7));
/// ```
pub fn fiscal_year(date: NaiveDate, start_month: u32, register: Option<NaiveDate>) -> (i32, i64) {
    let (start, reference) = match register {
        Some(r) => (r.month(), r.year()),
        None => (start_month, FISCAL_REFERENCE_YEAR),
    };
    let year = if date.month() < start {
        date.year() - 1
    } else {
        date.year()
    };
    (year, i64::from(year) - i64::from(reference) + 1)
}

/// The period value of `rotate` for `date`: `none`, `yyyy`, the fiscal year's first calendar
/// year, `yyyymm` or `yyyymmdd`.
///
/// ```
/// use chrono::NaiveDate;
/// use cqrs_command_handler::sequence::{RotateBy, rotate_value};
///
/// let day = NaiveDate::from_ymd_opt(2026, 3, 9).unwrap();
/// assert_eq!(rotate_value(RotateBy::None, day, 2025), "none");
/// assert_eq!(rotate_value(RotateBy::Yearly, day, 2025), "2026");
/// assert_eq!(rotate_value(RotateBy::FiscalYearly, day, 2025), "2025");
/// assert_eq!(rotate_value(RotateBy::Monthly, day, 2025), "202603");
/// assert_eq!(rotate_value(RotateBy::Daily, day, 2025), "20260309");
/// ```
pub fn rotate_value(rotate: RotateBy, date: NaiveDate, fiscal_start_year: i32) -> String {
    match rotate {
        RotateBy::None => "none".to_string(),
        RotateBy::Yearly => format!("{:04}", date.year()),
        RotateBy::FiscalYearly => format!("{fiscal_start_year:04}"),
        RotateBy::Monthly => format!("{:04}{:02}", date.year(), date.month()),
        RotateBy::Daily => format!("{:04}{:02}{:02}", date.year(), date.month(), date.day()),
    }
}

/// Parses a time zone setting: `UTC`, `Z`, or an offset `+09:00`, `-0530`, `+09`.
///
/// ```
/// use cqrs_command_handler::sequence::parse_time_zone;
///
/// assert_eq!(parse_time_zone("+09:00").unwrap().local_minus_utc(), 9 * 3600);
/// assert_eq!(parse_time_zone("UTC").unwrap().local_minus_utc(), 0);
/// assert_eq!(parse_time_zone("-0530").unwrap().local_minus_utc(), -(5 * 3600 + 1800));
/// assert!(parse_time_zone("Asia/Tokyo").is_err());
/// ```
pub fn parse_time_zone(text: &str) -> Result<FixedOffset, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("utc") || text == "Z" {
        return Ok(Utc.fix());
    }
    let bad = || {
        format!(
            "time zone {text:?}: give a UTC offset such as +09:00 or UTC (named zones with \
             daylight saving time are not supported)"
        )
    };
    let (sign, rest) = match text.chars().next() {
        Some('+') => (1, &text[1..]),
        Some('-') => (-1, &text[1..]),
        _ => return Err(bad()),
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return Err(bad());
    }
    let hours: i32 = digits
        .get(..2)
        .and_then(|h| h.parse().ok())
        .ok_or_else(bad)?;
    let minutes: i32 = digits.get(2..).map_or(Ok(0), |m| {
        if m.is_empty() {
            Ok(0)
        } else {
            m.parse().map_err(|_| bad())
        }
    })?;
    if hours > 18 || minutes > 59 {
        return Err(bad());
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60)).ok_or_else(bad)
}

/// A sequence's master data (`MASTER#tenant` / `MASTER_DATA#typeCode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceSettings {
    /// The parsed format.
    pub pieces: Vec<Piece>,
    /// The fiscal year's first month (1-12).
    pub start_month: u32,
    /// The register date, when given.
    pub register_date: Option<NaiveDate>,
    /// The default rotation.
    pub rotate_by: Option<RotateBy>,
}

impl SequenceSettings {
    /// The settings of `item`'s attributes (`format`, `startMonth`, `registerDate`, `rotateBy`),
    /// or the defaults without an item. A bad value is a 400 naming the item and attribute.
    pub fn from_item(item: Option<&Item>) -> Result<Self, ApiError> {
        let Some(item) = item else {
            return Ok(SequenceSettings {
                pieces: parse_format(DEFAULT_FORMAT).unwrap_or_default(),
                start_month: DEFAULT_START_MONTH,
                register_date: None,
                rotate_by: None,
            });
        };
        let bad = |name: &str, detail: String| {
            ApiError::bad_field(
                "format",
                format!("master data {} attribute {name}: {detail}", item.id),
            )
        };
        let attributes = &item.attributes;
        let format = match attributes.get("format") {
            None | Some(Value::Null) => DEFAULT_FORMAT,
            Some(Value::String(s)) => s.as_str(),
            Some(other) => return Err(bad("format", format!("{other} is not a string"))),
        };
        let pieces = parse_format(format).map_err(|e| bad("format", e))?;
        let start_month = match attributes.get("startMonth") {
            None | Some(Value::Null) => DEFAULT_START_MONTH,
            Some(value) => value
                .as_i64()
                .and_then(|m| u32::try_from(m).ok())
                .filter(|m| (1..=12).contains(m))
                .ok_or_else(|| bad("startMonth", format!("{value} is not a month 1-12")))?,
        };
        let register_date = match attributes.get("registerDate") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                parse_day(s, Utc.fix())
                    .map(|(day, _)| day)
                    .map_err(|e| bad("registerDate", e))?,
            ),
            Some(other) => return Err(bad("registerDate", format!("{other} is not a date"))),
        };
        let rotate_by = match attributes.get("rotateBy") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(RotateBy::parse(s).ok_or_else(|| {
                bad(
                    "rotateBy",
                    format!("{s:?}: none, yearly, fiscal_yearly, monthly or daily"),
                )
            })?),
            Some(other) => return Err(bad("rotateBy", format!("{other} is not a string"))),
        };
        Ok(SequenceSettings {
            pieces,
            start_month,
            register_date,
            rotate_by,
        })
    }
}

/// The local date and instant of `text` in `zone`: `YYYY-MM-DD` is that local day (at midnight),
/// an RFC 3339 instant is converted.
fn parse_day(text: &str, zone: FixedOffset) -> Result<(NaiveDate, DateTime<FixedOffset>), String> {
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let instant = zone
            .from_local_datetime(&day.and_time(NaiveTime::MIN))
            .single()
            .ok_or_else(|| format!("{text:?} is not a day in {zone}"))?;
        return Ok((day, instant));
    }
    let instant = DateTime::parse_from_rfc3339(text)
        .map_err(|e| format!("{text:?} is neither YYYY-MM-DD nor an RFC 3339 time: {e}"))?
        .with_timezone(&zone);
    Ok((instant.date_naive(), instant))
}

/// What a draw needs besides its request.
#[derive(Debug, Clone)]
pub struct DrawContext<'a> {
    /// The store.
    pub store: &'a Store,
    /// Who draws.
    pub caller: &'a Caller,
    /// The caller's address.
    pub ip: &'a str,
    /// The request id.
    pub request_id: &'a str,
}

/// One draw's request, whichever route it came from.
#[derive(Debug, Clone)]
pub struct DrawRequest<'a> {
    /// The tenant whose sequence it is.
    pub tenant: &'a str,
    /// The sequence.
    pub type_code: &'a str,
    /// The rotation asked for.
    pub rotate_by: Option<RotateBy>,
    /// `code1`..`code5`.
    pub params: &'a SequenceParams,
    /// The day, when given.
    pub date: Option<&'a str>,
    /// Prefix.
    pub prefix: Option<&'a str>,
    /// Postfix.
    pub postfix: Option<&'a str>,
}

/// Draws the next number: checks the tenant rules, reads the format and the time zone (tenant,
/// else `common`), refuses a bad format or request before anything is written, then bumps the
/// counter once and formats the number.
pub async fn draw(context: &DrawContext<'_>, request: &DrawRequest<'_>) -> Result<Drawn, ApiError> {
    let pk = tenant_seq_pk(request.tenant).map_err(|e| ApiError::bad_field("tenantCode", e))?;
    context.caller.authorize_write(&pk)?;
    let format_sk =
        sequence_format_sk(request.type_code).map_err(|e| ApiError::bad_field("typeCode", e))?;
    let zone_sk = setting_sk(TIME_ZONE_SETTING.0, TIME_ZONE_SETTING.1)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let codes = request.params.codes()?;
    // A format or time zone expired now is as absent as on the query side.
    let now = Utc::now().timestamp();
    let (format_item, zone_item) = tokio::try_join!(
        context
            .store
            .master_item_with_common(request.tenant, &format_sk, now),
        context
            .store
            .master_item_with_common(request.tenant, &zone_sk, now),
    )
    .map_err(ApiError::from)?;
    let settings = SequenceSettings::from_item(format_item.as_ref().map(|(item, _)| item))?;
    let format_source = format_item.as_ref().map_or("default", |(_, s)| s.as_str());
    let (zone, zone_name) = match &zone_item {
        None => (Utc.fix(), "UTC".to_string()),
        Some((item, _)) => {
            let text = item
                .attributes
                .get("value")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ApiError::bad_field(
                        "timeZone",
                        format!("setting {} has no string attribute `value`", item.id),
                    )
                })?;
            let zone = parse_time_zone(text).map_err(|e| {
                ApiError::bad_field("timeZone", format!("setting {}: {e}", item.id))
            })?;
            (zone, text.trim().to_string())
        }
    };
    let (day, instant) = match request.date {
        Some(text) => parse_day(text, zone).map_err(|e| ApiError::bad_field("date", e))?,
        None => {
            let now = Utc::now().with_timezone(&zone);
            (now.date_naive(), now)
        }
    };
    let rotate_by = request.rotate_by.or(settings.rotate_by).unwrap_or_default();
    let (fiscal_start, fiscal_no) = fiscal_year(day, settings.start_month, settings.register_date);
    let rotate = rotate_value(rotate_by, day, fiscal_start);
    let sk = sequence_sk(request.type_code, &codes, &rotate)
        .map_err(|e| ApiError::bad_field("params", e))?;
    // Every word must render before a number is drawn: a draw that cannot be formatted is
    // refused without using up a number.
    let probe = FormatValues {
        no: 0,
        fiscal_year: fiscal_no,
        date: day,
        codes: &codes,
    };
    render(&settings.pieces, &probe).map_err(|e| ApiError::bad_field("params", e))?;
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    let no = context
        .store
        .next_sequence(&SequenceDraw {
            pk: pk.clone(),
            sk: sk.clone(),
            tenant_code: request.tenant.to_string(),
            type_code: request.type_code.to_string(),
            rotate_by: rotate_by.as_str().to_string(),
            user: context.caller.user_id.clone(),
            ip: context.ip.to_string(),
            request_id: context.request_id.to_string(),
            now,
        })
        .await
        .map_err(ApiError::from)?;
    let formatted = render(&settings.pieces, &FormatValues { no, ..probe })
        .map_err(|e| ApiError::bad_field("params", e))?;
    Ok(Drawn {
        id: cqrs_keys::generate_id(&pk, &sk),
        pk,
        sk,
        no,
        formatted_no: format!(
            "{}{formatted}{}",
            request.prefix.unwrap_or_default(),
            request.postfix.unwrap_or_default()
        ),
        issued_at: instant.to_rfc3339_opts(SecondsFormat::Millis, false),
        rotate_by,
        rotate_value: rotate,
        fiscal_year: fiscal_no,
        format_source,
        time_zone: zone_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    #[test]
    fn only_words_between_markers_are_replaced() {
        let pieces = parse_format("year-%%year%%").unwrap();
        let values = FormatValues {
            no: 1,
            fiscal_year: 1,
            date: day(2026, 1, 2),
            codes: &[],
        };
        assert_eq!(render(&pieces, &values).unwrap(), "year-2026");
    }

    #[test]
    fn padding_never_truncates_and_is_bounded() {
        let pieces = parse_format("%%no#:0>3%%").unwrap();
        let values = |no| FormatValues {
            no,
            fiscal_year: 1,
            date: day(2026, 1, 2),
            codes: &[],
        };
        assert_eq!(render(&pieces, &values(7)).unwrap(), "007");
        assert_eq!(render(&pieces, &values(12345)).unwrap(), "12345");
        assert!(parse_format("%%no#:0>65%%").is_err());
        assert!(parse_format("%%no#0>6%%").is_err());
        assert!(parse_format("%%no#:0>%%").is_err());
        assert_eq!(
            parse_format("%%no#:x>10%%").unwrap(),
            vec![Piece::Word {
                name: "no".into(),
                pad: Some(('x', 10))
            }]
        );
    }

    #[test]
    fn a_code_the_format_needs_must_be_given() {
        let pieces = parse_format("%%code2%%").unwrap();
        let values = FormatValues {
            no: 1,
            fiscal_year: 1,
            date: day(2026, 1, 2),
            codes: &["a"],
        };
        assert!(render(&pieces, &values).unwrap_err().contains("code2"));
    }

    #[test]
    fn fiscal_rotation_follows_start_month() {
        // startMonth 10: 2026-09-30 is in the fiscal year that began in October 2025.
        let (start, _) = fiscal_year(day(2026, 9, 30), 10, None);
        assert_eq!(
            rotate_value(RotateBy::FiscalYearly, day(2026, 9, 30), start),
            "2025"
        );
        let (start, _) = fiscal_year(day(2026, 10, 1), 10, None);
        assert_eq!(
            rotate_value(RotateBy::FiscalYearly, day(2026, 10, 1), start),
            "2026"
        );
        // January start: the fiscal year is the calendar year.
        assert_eq!(fiscal_year(day(2026, 1, 1), 1, None), (2026, 74));
    }

    #[test]
    fn codes_are_given_in_order() {
        let params = SequenceParams {
            code2: Some("b".into()),
            ..Default::default()
        };
        match params.codes().unwrap_err() {
            ApiError::BadRequest { field, .. } => {
                assert_eq!(field.as_deref(), Some("params.code2"))
            }
            other => panic!("{other:?}"),
        }
        let params = SequenceParams {
            code1: Some("a".into()),
            code2: Some("b".into()),
            ..Default::default()
        };
        assert_eq!(params.codes().unwrap(), ["a", "b"]);
    }

    #[test]
    fn dates_are_local_to_the_zone() {
        let tokyo = parse_time_zone("+09:00").unwrap();
        // 2026-03-31T20:00Z is already April 1st in Tokyo.
        let (d, _) = parse_day("2026-03-31T20:00:00Z", tokyo).unwrap();
        assert_eq!(d, day(2026, 4, 1));
        let (d, instant) = parse_day("2026-03-31", tokyo).unwrap();
        assert_eq!(d, day(2026, 3, 31));
        assert_eq!(instant.to_rfc3339(), "2026-03-31T00:00:00+09:00");
        assert!(parse_day("31/03/2026", tokyo).is_err());
    }
}
