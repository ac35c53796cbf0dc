	data := []byte(
		"0000005a0001000b0000000200077264" +
			"6b61666b61ffffffff000001f4000000" +
			"01032000000100000000ffffffff0000" +
			"00010004746573740000000100000000" +
			"ffffffff0000000000000074ffffffff" +
			"ffffffff00100000000000000000")

	message, err := hex.DecodeString(string(data))
	if stream.message.size != 90 {
		t.Errorf("Wrong message size %d", stream.message.size)
	}
