package mapping

// field is a mappable member of an infraction.
type field uint8

// The keys of `response.fields` (SPEC 6, 12).
const (
	fieldID field = iota
	fieldDate
	fieldDescription
	fieldPlace
	fieldAmount
	fieldCurrency
	fieldStatus
	fieldUnits
	numFields
)

var fieldNames = [numFields]string{"id", "date", "description", "place", "amount", "currency", "status", "units"}

// String is the config name of f.
func (f field) String() string { return fieldNames[f] }

// fieldByName is the field of a config name.
func fieldByName(name string) (field, bool) {
	for f := range numFields {
		if fieldNames[f] == name {
			return f, true
		}
	}
	return 0, false
}

// setField is the field a key of `set` gives: a field's name, or
// status_raw for status.
func setField(name string) (field, bool) {
	if name == "status_raw" {
		return fieldStatus, true
	}
	return fieldByName(name)
}

// FieldNames lists the keys of `response.fields`, in field order.
func FieldNames() []string { return fieldNames[:] }

// Reasons a configured field did not map in an item (SPEC 13).
const (
	// ReasonMissing: the field's selector found nothing.
	ReasonMissing = "missing"
	// ReasonInvalid: the value did not normalise.
	ReasonInvalid = "invalid"
	// ReasonUnknownStatus: the status text is not in status_map.
	ReasonUnknownStatus = "unknown_status"
	// ReasonSuspectText: the text holds U+FFFD or mojibake.
	ReasonSuspectText = "suspect_text"
)

// reason indexes the counts of Health.
type reason uint8

const (
	missing reason = iota
	invalid
	unknownStatus
	suspectText
	numReasons
)

var reasonNames = [numReasons]string{ReasonMissing, ReasonInvalid, ReasonUnknownStatus, ReasonSuspectText}

func (r reason) String() string { return reasonNames[r] }
