package main

import (
	"bytes"
	"context"
	"testing"
)

func TestTravel(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

const want = `traveller: I'd like to fly to Lisbon
skye: Noted. Now tell me the day of departure.
  [route flight, step ask_date, data {"destination":"Lisbon"}, model calls: 2]
traveller: Actually, I changed my mind: find me a hotel in Porto instead
skye: Noted. Now tell me the number of nights.
  [route hotel, step ask_nights, data {"city":"Porto"}, model calls: 2]
traveller: 3 nights
  [route hotel, step END_ROUTE, data {"city":"Porto","nights":3}, model calls: 1]
  [Book a hotel complete: the application books it]
traveller: Now back to my flight
skye: Noted. Now tell me the day of departure.
  [route flight, step ask_date, data {"destination":"Lisbon"}, model calls: 2]
traveller: On 2025-07-14
skye: Noted. Now tell me the number of passengers.
  [route flight, step ask_passengers, data {"departureDate":"2025-07-14","destination":"Lisbon"}, model calls: 2]
traveller: 2 passengers
  [route flight, step END_ROUTE, data {"departureDate":"2025-07-14","destination":"Lisbon","passengers":2}, model calls: 1]
  [Book a flight complete: the application books it]
booked: flight to Lisbon on 2025-07-14 for 2; hotel in Porto for 3 nights
`
