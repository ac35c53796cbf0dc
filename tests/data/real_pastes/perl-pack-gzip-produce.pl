# a encoded produce request hex stream (gzip)
my $encoded_GZIP = pack( 'H*', '0000007a000000000000000400000001000005dc0000000100076d79746f706963000000010000000000000051000000000000000000000045a5c2da7f0001ffffffff000000371f8b0800d7054f5300036360800331b99d0d171918fe030190c7e1919a9393af60a8c880a4c274ca65217415468a002d91792a44000000' );

is_deeply( decode_produce_request( \$encoded_GZIP ), $decoded, 'decoded correctly' );
substr( $compared_orig, 57,  4, '' );   # remove CRC
