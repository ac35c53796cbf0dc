  test "decode correctly parses a valid response with an offset" do
    response = << 1 :: 32, 3 :: 16, "bar" :: binary, 1 :: 32, 0 :: 32, 0 :: 16, 1 :: 32, 10 :: 64 >>
    expected_response = %Response{offsets: [{"bar", [%{error_code: 0, offsets: [10], partition: 0}]}]}

    assert expected_response == Offset.decode(response)
  end
