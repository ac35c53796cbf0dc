func TestProduceV7(t *testing.T) {
	data := []byte(
		"00000079000000070000007100077264" +
			"6b61666b61ffffffff00007530000000" +
			"01000474657374000000010000000000" +
			"00004a00000000000000000000003e00" +
			"00000002d801bd270000000000000000" +
			"0183845fb6bb00000183845fb6bbffff" +
			"ffffffffffffffffffffffff00000001" +
			"18000000010c0008776f6f6600")
	message, _ := hex.DecodeString(string(data))
	check(t, message, true) // client side

	data = []byte(
		"00000034000000710000000100047465" +
			"73740000000100000000000000000000" +
			"00000080ffffffffffffffff00000000" +
			"0000000000000000")
	message, _ = hex.DecodeString(string(data))
	check(t, message, false)
}
