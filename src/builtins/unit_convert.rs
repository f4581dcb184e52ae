//! `unit_convert`: exact-factor conversions between common units.

use super::{clean_number, closest, Args, BuiltinContext, BuiltinError};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dimension {
    Length,
    Mass,
    Temperature,
    Time,
    Speed,
    Data,
    Volume,
}

impl Dimension {
    fn name(self) -> &'static str {
        match self {
            Dimension::Length => "length",
            Dimension::Mass => "mass",
            Dimension::Temperature => "temperature",
            Dimension::Time => "time",
            Dimension::Speed => "speed",
            Dimension::Data => "data size",
            Dimension::Volume => "volume",
        }
    }
}

struct Unit {
    symbol: &'static str,
    aliases: &'static [&'static str],
    dimension: Dimension,
    /// Multiplier to the base unit (m, kg, s). Temperatures use `to_kelvin` instead
    /// because their scales are offset, not just scaled.
    factor: f64,
}

// Factors are the exact international definitions (1 in = 2.54 cm, 1 lb = 0.45359237 kg).
const UNITS: &[Unit] = &[
    unit(
        "m",
        &["meter", "meters", "metre", "metres"],
        Dimension::Length,
        1.0,
    ),
    unit(
        "km",
        &["kilometer", "kilometers", "kilometre", "kilometres"],
        Dimension::Length,
        1000.0,
    ),
    unit(
        "cm",
        &["centimeter", "centimeters", "centimetre", "centimetres"],
        Dimension::Length,
        0.01,
    ),
    unit(
        "mm",
        &["millimeter", "millimeters", "millimetre", "millimetres"],
        Dimension::Length,
        0.001,
    ),
    unit("mi", &["mile", "miles"], Dimension::Length, 1609.344),
    unit("ft", &["foot", "feet", "'"], Dimension::Length, 0.3048),
    unit("in", &["inch", "inches", "\""], Dimension::Length, 0.0254),
    unit("yd", &["yard", "yards"], Dimension::Length, 0.9144),
    unit(
        "kg",
        &["kgs", "kilogram", "kilograms", "kilo", "kilos"],
        Dimension::Mass,
        1.0,
    ),
    unit("g", &["gram", "grams"], Dimension::Mass, 0.001),
    unit(
        "lb",
        &["lbs", "pound", "pounds"],
        Dimension::Mass,
        0.453_592_37,
    ),
    unit(
        "oz",
        &["ounce", "ounces"],
        Dimension::Mass,
        0.453_592_37 / 16.0,
    ),
    unit("C", &["°c", "celsius", "degc"], Dimension::Temperature, 1.0),
    unit(
        "F",
        &["°f", "fahrenheit", "degf"],
        Dimension::Temperature,
        1.0,
    ),
    unit("K", &["kelvin", "kelvins"], Dimension::Temperature, 1.0),
    unit(
        "s",
        &["sec", "secs", "second", "seconds"],
        Dimension::Time,
        1.0,
    ),
    unit("min", &["mins", "minute", "minutes"], Dimension::Time, 60.0),
    unit(
        "h",
        &["hr", "hrs", "hour", "hours"],
        Dimension::Time,
        3600.0,
    ),
    unit("d", &["day", "days"], Dimension::Time, 86_400.0),
    // Speed in m/s; a knot is one nautical mile (1852 m) per hour.
    unit(
        "m/s",
        &["mps", "meters per second", "metres per second"],
        Dimension::Speed,
        1.0,
    ),
    unit(
        "km/h",
        &[
            "kph",
            "kmh",
            "kmph",
            "kilometers per hour",
            "kilometres per hour",
        ],
        Dimension::Speed,
        1000.0 / 3600.0,
    ),
    unit(
        "mph",
        &["mi/h", "miles per hour"],
        Dimension::Speed,
        1609.344 / 3600.0,
    ),
    unit(
        "kn",
        &["kt", "kts", "knot", "knots"],
        Dimension::Speed,
        1852.0 / 3600.0,
    ),
    // Data sizes in bytes: decimal prefixes are powers of 1000, binary (IEC) ones of 1024.
    unit("B", &["byte", "bytes"], Dimension::Data, 1.0),
    unit("KB", &["kilobyte", "kilobytes"], Dimension::Data, 1e3),
    unit("MB", &["megabyte", "megabytes"], Dimension::Data, 1e6),
    unit("GB", &["gigabyte", "gigabytes"], Dimension::Data, 1e9),
    unit("TB", &["terabyte", "terabytes"], Dimension::Data, 1e12),
    unit("KiB", &["kibibyte", "kibibytes"], Dimension::Data, 1024.0),
    unit(
        "MiB",
        &["mebibyte", "mebibytes"],
        Dimension::Data,
        1_048_576.0,
    ),
    unit(
        "GiB",
        &["gibibyte", "gibibytes"],
        Dimension::Data,
        1_073_741_824.0,
    ),
    unit(
        "TiB",
        &["tebibyte", "tebibytes"],
        Dimension::Data,
        1_099_511_627_776.0,
    ),
    // Volume in litres; gallons, quarts, pints and fluid ounces are US customary.
    unit(
        "L",
        &["liter", "liters", "litre", "litres"],
        Dimension::Volume,
        1.0,
    ),
    unit(
        "mL",
        &["milliliter", "milliliters", "millilitre", "millilitres"],
        Dimension::Volume,
        0.001,
    ),
    unit(
        "m3",
        &[
            "m³",
            "cubic meter",
            "cubic meters",
            "cubic metre",
            "cubic metres",
        ],
        Dimension::Volume,
        1000.0,
    ),
    unit(
        "gal",
        &["gallon", "gallons"],
        Dimension::Volume,
        3.785_411_784,
    ),
    unit(
        "qt",
        &["quart", "quarts"],
        Dimension::Volume,
        3.785_411_784 / 4.0,
    ),
    unit(
        "pt",
        &["pint", "pints"],
        Dimension::Volume,
        3.785_411_784 / 8.0,
    ),
    unit(
        "floz",
        &["fl oz", "fluid ounce", "fluid ounces"],
        Dimension::Volume,
        3.785_411_784 / 128.0,
    ),
];

const fn unit(
    symbol: &'static str,
    aliases: &'static [&'static str],
    dimension: Dimension,
    factor: f64,
) -> Unit {
    Unit {
        symbol,
        aliases,
        dimension,
        factor,
    }
}

pub(super) fn schema() -> Value {
    let symbols: Vec<&str> = UNITS.iter().map(|u| u.symbol).collect();
    json!({
        "type": "object",
        "properties": {
            "value": {
                "type": "number",
                "description": "The quantity to convert, in `from` units."
            },
            "from": {
                "type": "string",
                "description": format!(
                    "Unit of `value`. Length: m, km, cm, mm, mi, ft, in, yd. Mass: kg, g, lb, oz. \
                     Temperature: C, F, K. Time: s, min, h, d. Speed: m/s, km/h, mph, kn. \
                     Data: B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024). \
                     Volume: L, mL, m3, gal, qt, pt, floz (US). Full names (\"miles\", \"celsius\") also work. \
                     Known symbols: {}.", symbols.join(", ")
                )
            },
            "to": {
                "type": "string",
                "description": "Unit to convert into; must measure the same thing as `from`. The result is \
                    a plain JSON number rounded to 12 significant digits."
            }
        },
        "required": ["value", "from", "to"],
        "additionalProperties": false
    })
}

pub(super) fn call(args: &Args<'_>, _ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let value = args.req_f64("value")?;
    let from = lookup(args.req_str("from")?, "from")?;
    let to = lookup(args.req_str("to")?, "to")?;
    if from.dimension != to.dimension {
        return Err(BuiltinError::invalid(format!(
            "cannot convert {} (`{}`) to {} (`{}`)",
            from.dimension.name(),
            from.symbol,
            to.dimension.name(),
            to.symbol
        )));
    }
    let result = if from.dimension == Dimension::Temperature {
        let kelvin = to_kelvin(value, from.symbol);
        // A small tolerance keeps -273.15 °C from failing on rounding in the last bit.
        if kelvin < -1e-9 {
            return Err(BuiltinError::execution(format!(
                "{value} {} is below absolute zero",
                from.symbol
            )));
        }
        from_kelvin(kelvin.max(0.0), to.symbol)
    } else {
        value * from.factor / to.factor
    };
    clean_number(result)
        .ok_or_else(|| BuiltinError::execution("the converted value is too large to represent"))
}

fn to_kelvin(value: f64, symbol: &str) -> f64 {
    match symbol {
        "C" => value + 273.15,
        "F" => (value - 32.0) * 5.0 / 9.0 + 273.15,
        _ => value,
    }
}

fn from_kelvin(kelvin: f64, symbol: &str) -> f64 {
    match symbol {
        "C" => kelvin - 273.15,
        "F" => (kelvin - 273.15) * 9.0 / 5.0 + 32.0,
        _ => kelvin,
    }
}

fn lookup(name: &str, key: &str) -> Result<&'static Unit, BuiltinError> {
    let wanted = name.trim();
    let lower = wanted.to_lowercase();
    // Symbols are matched case-insensitively: none of them collide once lowered, and
    // models write "KM", "c" and "Kg" interchangeably.
    let found = UNITS
        .iter()
        .find(|u| u.symbol.eq_ignore_ascii_case(&lower) || u.aliases.iter().any(|a| *a == lower));
    found.ok_or_else(|| {
        let names = UNITS
            .iter()
            .flat_map(|u| std::iter::once(u.symbol).chain(u.aliases.iter().copied()));
        let hint = match closest(wanted, names) {
            Some(c) => format!("; did you mean `{c}`?"),
            None => String::new(),
        };
        BuiltinError::invalid(format!(
            "unknown unit `{name}` in `{key}`{hint} (supported: {})",
            UNITS
                .iter()
                .map(|u| u.symbol)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::super::{call as call_builtin, BuiltinErrorKind};
    use super::*;

    fn run(value: Value, from: &str, to: &str) -> Result<Value, BuiltinError> {
        call_builtin(
            "unit_convert",
            &json!({"value": value, "from": from, "to": to}),
            &BuiltinContext { now_unix_ms: 0 },
        )
    }

    fn ok(value: f64, from: &str, to: &str) -> Value {
        run(json!(value), from, to)
            .unwrap_or_else(|e| panic!("{value} {from}->{to}: {}", e.message))
    }

    #[test]
    fn length() {
        assert_eq!(ok(1.0, "mi", "km"), json!(1.609344));
        assert_eq!(ok(1.0, "km", "m"), json!(1000));
        assert_eq!(ok(12.0, "in", "ft"), json!(1));
        assert_eq!(ok(1.0, "yd", "in"), json!(36));
        assert_eq!(ok(1.0, "m", "ft"), json!(3.28083989501));
        assert_eq!(ok(25.4, "mm", "in"), json!(1));
        assert_eq!(ok(5280.0, "feet", "miles"), json!(1));
        assert_eq!(ok(100.0, "cm", "m"), json!(1));
        assert_eq!(ok(0.1, "m", "cm"), json!(10));
    }

    #[test]
    fn speed_data_and_volume() {
        assert_eq!(ok(100.0, "km/h", "m/s"), json!(27.7777777778));
        assert_eq!(ok(60.0, "mph", "km/h"), json!(96.56064));
        assert_eq!(ok(10.0, "knots", "km/h"), json!(18.52));
        assert_eq!(ok(1.0, "GiB", "MiB"), json!(1024));
        assert_eq!(ok(1.0, "GiB", "GB"), json!(1.073741824));
        assert_eq!(ok(1.5, "MB", "KB"), json!(1500));
        assert_eq!(ok(1.0, "gal", "L"), json!(3.785411784));
        assert_eq!(ok(2.0, "L", "mL"), json!(2000));
        assert!(run(json!(1), "MB", "km/h").is_err());
    }

    #[test]
    fn mass() {
        assert_eq!(ok(1.0, "lb", "kg"), json!(0.45359237));
        assert_eq!(ok(16.0, "oz", "lb"), json!(1));
        assert_eq!(ok(1.0, "kg", "g"), json!(1000));
        assert_eq!(ok(1.0, "kg", "lb"), json!(2.20462262185));
    }

    #[test]
    fn temperature() {
        assert_eq!(ok(100.0, "C", "F"), json!(212));
        assert_eq!(ok(32.0, "F", "C"), json!(0));
        assert_eq!(ok(-40.0, "F", "C"), json!(-40));
        assert_eq!(ok(0.0, "C", "K"), json!(273.15));
        assert_eq!(ok(98.6, "fahrenheit", "celsius"), json!(37));
        assert_eq!(ok(0.0, "K", "F"), json!(-459.67));
        assert_eq!(ok(-273.15, "C", "K"), json!(0));
        assert_eq!(ok(20.0, "°C", "c"), json!(20));
        let e = run(json!(-300), "C", "K").unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
        assert!(e.message.contains("below absolute zero"));
        assert!(run(json!(-1), "K", "C").is_err());
    }

    #[test]
    fn time() {
        assert_eq!(ok(90.0, "min", "h"), json!(1.5));
        assert_eq!(ok(1.0, "d", "s"), json!(86400));
        assert_eq!(ok(1.0, "hours", "minutes"), json!(60));
        assert_eq!(ok(1.0, "s", "d"), json!(0.0000115740740741));
    }

    #[test]
    fn units_are_case_insensitive() {
        assert_eq!(ok(1.0, "KM", "M"), json!(1000));
        assert_eq!(ok(1.0, "Kg", "G"), json!(1000));
        assert_eq!(ok(1.0, " Miles ", "KM"), json!(1.609344));
    }

    #[test]
    fn errors() {
        let e = run(json!(1), "m", "kg").unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        assert_eq!(e.message, "cannot convert length (`m`) to mass (`kg`)");
        let e = run(json!(1), "metr", "ft").unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        assert!(
            e.message
                .starts_with("unknown unit `metr` in `from`; did you mean `met"),
            "{}",
            e.message
        );
        let e = run(json!(1), "m", "parsecs").unwrap_err();
        assert!(
            e.message.starts_with("unknown unit `parsecs` in `to`"),
            "{}",
            e.message
        );
        let e = run(json!("1"), "m", "ft").unwrap_err();
        assert!(e.message.contains("must be a number"));
        let e = run(json!(1e308), "mi", "mm").unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
    }

    #[test]
    fn symbols_do_not_collide() {
        let mut seen = std::collections::HashSet::new();
        for u in UNITS {
            assert!(seen.insert(u.symbol.to_lowercase()), "{}", u.symbol);
            for a in u.aliases {
                assert_eq!(*a, a.to_lowercase());
                assert!(seen.insert(a.to_string()), "{a}");
            }
        }
    }
}
