package normalize_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/multas/aggregator/sources/normalize"
)

func ExampleAmount() {
	for _, in := range []string{"R$ 1.234,56", "1,5", "$ 185.000"} {
		got, err := normalize.Amount(in, normalize.Unset)
		fmt.Printf("%q: %q ambiguous=%v\n", in, got, errors.Is(err, normalize.ErrAmbiguous))
	}
	got, _ := normalize.Amount("$ 185.000", normalize.Comma)
	fmt.Printf("with decimal \",\": %q\n", got)
	// Output:
	// "R$ 1.234,56": "1234.56" ambiguous=false
	// "1,5": "1.50" ambiguous=false
	// "$ 185.000": "" ambiguous=true
	// with decimal ",": "185000.00"
}

func ExampleLayouts_Date() {
	layouts, err := normalize.CompileLayouts([]string{"dd/MM/yyyy 'às' HH:mm:ss", "d 'de' MMMM 'de' yyyy"})
	if err != nil {
		fmt.Println(err)
		return
	}
	loc := time.FixedZone("-03", -3*60*60)
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, loc)
	for _, in := range []string{"10/06/2016 às 12:36:11", "14 de marzo de 2026", "14/03/2026"} {
		got, err := layouts.Date(in, false, loc, now)
		fmt.Println(got, err)
	}
	// Output:
	// 2016-06-10T12:36:11-03:00 <nil>
	// 2026-03-14T00:00:00-03:00 <nil>
	//  no layout reads the whole value: layout[0] "dd/MM/yyyy 'às' HH:mm:ss" expects white space at character 11, past the end; layout[1] "d 'de' MMMM 'de' yyyy" expects white space at character 3
}
